"""`make bench`: every single-process benchmark, side by side with PyTorch in the same run.
The training table runs twice, with NumPy's BLAS (and PyTorch) on 1 and on 2 threads, each in
its own process (OpenBLAS reads its thread count when it loads); the rest run on one thread.
(`benchmarks/comm.py`, `ddp.py` and `parallel_graph.py` launch their own ranks.)"""

import os
import subprocess
import sys

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # before NumPy loads

import compile_time
import jit_kernels
import op_overhead

TRAINING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "training.py")

if __name__ == "__main__":
    for threads in ("1", "2"):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
        subprocess.run([sys.executable, TRAINING], env=env, check=True)
        print()
    print(compile_time.report(compile_time.run()))
    print()
    print(jit_kernels.report(jit_kernels.run()))
    print()
    print(op_overhead.report(op_overhead.run()))
