"""What really ran, inside the worker: the runtime audit of ``ModelNew.forward``, one profiled call's GPU work, and
which side streams were joined."""
