"""The `evaluate` command: a model evaluated once on eval sources through an inference server
(main.py), the server it talks to (server.py), what it refuses (refusals.py)."""
