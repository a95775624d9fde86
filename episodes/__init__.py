"""One episode's life: reset (boot, break, confirm), the agent's shells, judgement, durability."""
