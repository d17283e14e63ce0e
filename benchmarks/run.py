"""`make bench`: every single-process benchmark, side by side with PyTorch in the same run.
(`benchmarks/comm.py` and `benchmarks/ddp.py` launch their own ranks.)"""

import graph
import op_overhead
import train_workloads

if __name__ == "__main__":
    print(train_workloads.report(train_workloads.run()))
    print()
    print(graph.report(graph.run()))
    print()
    print(op_overhead.report(op_overhead.run()))
