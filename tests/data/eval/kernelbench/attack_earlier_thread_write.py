# Attack: run Python on the worker's other threads (a C signal handler through ctypes, sent to each
# with tgkill), among them any thread started before the file rules went on, each trying to create
# a file in /tmp named after the evaluator's pid; the counts go to the worker's log.
import ctypes
import os
import signal
import threading
import time

import torch

_counts = {"wrote": 0, "refused": 0}
_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)


def _try_write(_signum):
    path = "/tmp/crl-py-other-thread-%d-%d" % (os.getppid(), threading.get_native_id())
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        _counts["wrote"] += 1
    except OSError:
        _counts["refused"] += 1


_handler = _HANDLER(_try_write)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tried = False

    def forward(self, x):
        if not self.tried:
            self.tried = True
            libc = ctypes.CDLL(None, use_errno=True)
            libc.signal(ctypes.c_int(signal.SIGURG), _handler)
            me = threading.get_native_id()
            others = 0
            for name in os.listdir("/proc/self/task"):
                tid = int(name)
                if tid != me and libc.syscall(234, os.getpid(), tid, signal.SIGURG) == 0:  # tgkill (x86-64's number)
                    others += 1
            time.sleep(0.3)
            os.write(2, ("earlier_thread_write: %d other threads signalled, %d wrote, %d refused\n"
                         % (others, _counts["wrote"], _counts["refused"])).encode())
        return torch.relu(x)
