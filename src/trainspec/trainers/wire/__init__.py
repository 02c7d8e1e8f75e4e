"""What passes between the RL trainer and the orchestrator: rollout batches (batch.py) through
a transport (transport.py builds one: transport_fs.py, transport_zmq.py), and the trainer's
weights back through the broadcast directory (broadcast.py). Both sides import this package;
it imports neither."""
