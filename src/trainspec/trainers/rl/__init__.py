"""The RL trainer: consumes rollouts through a transport, trains with a policy loss, and
publishes weights back to the sampler."""
