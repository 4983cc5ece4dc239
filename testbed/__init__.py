"""The testbed runner: a topology in Mininet with its controller and a host agent on every host.

``python -m testbed run leaf-spine`` (``make run-topology``) brings it all up and opens the
Mininet CLI with the testbed's own commands (``fail``, ``restore``, ``restart``, ``mrc``,
``status``); ``python -m testbed stop`` (``make stop``) removes whatever a run left. The
pieces: ``targets`` (what a target needs and how to get it), ``processes`` (child processes
with logs and a ready line), ``controller_run`` and ``agents`` (the controller and the host
agents of one run), ``session`` (all of it as one object that always cleans up), ``cli``.
"""
