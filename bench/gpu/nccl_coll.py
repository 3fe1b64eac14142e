"""NCCL collectives through PyTorch, timed as gorun's osu programs time theirs.

The reference for `osu/{allreduce,allgather,reduce_scatter,bcast,reduce} -d cuda`:
one process per GPU (all the GPUs there are, or NP), NVLink multicast off.
For each size a barrier, then every call timed alone up to
torch.cuda.synchronize() (gorun's GPU calls return with the result in
place, so NCCL's are timed to the same point) and followed by an untimed
barrier; the figure is the average over the timed calls, the maximum over
ranks, in microseconds. Sizes are OSU's: allreduce and reduce (to rank 0)
SIZE bytes of float32; allgather SIZE bytes per rank; reduce_scatter SIZE
bytes of input in all; bcast SIZE bytes (from rank 0). Prints `# <collective>` then `SIZE  TIME_US` lines.

    python3 bench/gpu/nccl_coll.py MAXBYTES [collective ...]
"""
import os, sys, time
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
import torch, torch.distributed as dist, torch.multiprocessing as mp

def sizes(lo, hi):
    n = lo
    while n <= hi:
        yield n
        n *= 2

def counts(s):
    return (1000, 200) if s <= 8192 else (100, 10)

def run(rank, n, mx, colls, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=torch.device("cuda", rank))
    send = torch.ones(mx // 4, dtype=torch.float32, device="cuda")
    recv = torch.zeros(mx // 4 * n, dtype=torch.float32, device="cuda")
    sendb = torch.ones(mx, dtype=torch.uint8, device="cuda")
    recvb = torch.zeros(mx * n, dtype=torch.uint8, device="cuda")
    for coll in colls:
        if rank == 0:
            print("# %s (NCCL %s, PyTorch %s, %d ranks)" % (coll, ".".join(map(str, torch.cuda.nccl.version())), torch.__version__, n), flush=True)
        lo = {"allgather": 1, "bcast": 1, "allreduce": 4, "reduce": 4, "reduce_scatter": 4 * n}[coll]
        for s in sizes(lo, mx):
            if coll == "allreduce":
                t = send[: s // 4]
                op = lambda: dist.all_reduce(t)
            elif coll == "reduce":
                t = send[: s // 4]
                op = lambda: dist.reduce(t, 0)
            elif coll == "allgather":
                a, b = sendb[:s], recvb[: s * n]
                op = lambda: dist.all_gather_into_tensor(b, a)
            elif coll == "reduce_scatter":
                k = s // 4 // n
                a, b = send[: k * n], recv[:k]
                op = lambda: dist.reduce_scatter_tensor(b, a)
            else:
                t = sendb[:s]
                op = lambda: dist.broadcast(t, 0)
            it, warm = counts(s)
            total = 0.0
            dist.barrier()
            for i in range(it + warm):
                t0 = time.perf_counter()
                op()
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                if i >= warm:
                    total += t1 - t0
                dist.barrier()
            avg = torch.tensor([total * 1e6 / it], dtype=torch.float64, device="cuda")
            dist.all_reduce(avg, op=dist.ReduceOp.MAX)
            if rank == 0:
                print("%-10d%18.2f" % (s, avg.item()), flush=True)
    dist.destroy_process_group()

if __name__ == "__main__":
    mx = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 30
    colls = sys.argv[2:] or ["allreduce", "allgather", "reduce_scatter", "bcast"]
    n = int(os.environ.get("NP", torch.cuda.device_count()))
    mp.spawn(run, args=(n, mx, colls, 29512), nprocs=n)
