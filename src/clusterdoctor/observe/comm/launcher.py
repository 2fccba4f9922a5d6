"""Line prefixes that launchers put before each line of a job's output, as a regular expression.

Seen on real output (fixtures and tests/data/comm): Open MPI ``--tag-output`` ``[1,0]<stdout>:``;
torchrun ``--tee`` ``[default0]:`` and ``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE`` brackets such as
``[default-r0-l0]:``; PyTorch's own ``[rank0]:``; Slurm ``srun -l`` `` 0: ``; DeepSpeed's pdsh
launcher ``worker-0: `` / ``104.171.201.171: ``; log viewers' ``[80746] `` line numbers; Markdown
indentation. Any number of them may be stacked (``[default0]:[rank0]:``).

:data:`LINE_PREFIX` matches such a stack at the start of a line (possibly empty); parsers anchor their
own line grammar after it.
"""

from __future__ import annotations

LINE_PREFIX = r"(?:[ \t]*(?:\[\d+,\d+\]<std(?:out|err)>:|\[[A-Za-z_][\w.\-]*\]:|\[\d+\][ \t]|\d+:|[A-Za-z0-9][\w.\-]*:[ \t]))*"
