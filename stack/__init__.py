"""Live hosts: the engine connection, the images they boot from, one episode's stack and a warm pool."""
