"""Agents that repair a host through a Shell."""

from .base import AGENTS, Agent, Endpoints, Task, agent_class, make_agent

__all__ = ["AGENTS", "Agent", "Endpoints", "Task", "agent_class", "make_agent"]
