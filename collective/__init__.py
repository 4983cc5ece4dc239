"""Training collectives over the host API: the NCCL of this testbed.

A job of N ranks runs a collective (ring all-reduce, all-gather, reduce-scatter, all-to-all)
over float32 buffers, each rank driving its host's agent through ``agent.api`` the way NCCL's
RDMA transport drives a NIC: one QP per peer, registered buffers, RDMA WRITE WITH IMMEDIATE
as the signal that a chunk has arrived. ``collective.plans`` says who sends what to whom at
each step (pure data), ``collective.data`` what the buffers hold and must hold at the end,
``collective.rank`` one rank's state machine, ``collective.job`` the launcher that connects the
ranks through a rendezvous and drives them to the end, and ``collective.report`` the figures
nccl-tests prints (time, algorithm and bus bandwidth) plus job completion time, the share of
the job spent waiting on the network, and when and why a failed job failed.
"""
