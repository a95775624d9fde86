"""Agents that repair a host through a Shell."""

from agents.base import AGENTS, Agent, Task, make_agent

__all__ = ["AGENTS", "Agent", "Task", "make_agent"]
