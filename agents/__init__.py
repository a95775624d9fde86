"""Agents that repair a host through a Shell."""

from fixos.agents.base import AGENTS, Agent, Endpoints, Task, agent_class, make_agent

__all__ = ["AGENTS", "Agent", "Endpoints", "Task", "agent_class", "make_agent"]
