"""Dockerfiles of the target hosts, one folder per image (shipped as package data)."""
