"""NCCL send/recv between GPU 0 and GPU 1 through PyTorch, in OSU bw terms.

The reference for gorun's `osu/bw -d cuda` and `osu/latency -d cuda`: one
process per GPU, NVLink multicast off. Prints OSU-format lines for bw (a
window of 64 isend/irecv then a 4-byte ack, MB/s = 10^6 bytes/s) and
latency (half the ping-pong round trip, microseconds).

    python3 bench/gpu/nccl_sendrecv.py [MAXBYTES]
"""
import os, sys, time
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
import torch, torch.distributed as dist, torch.multiprocessing as mp

def sizes(mx):
    n = 1
    while n <= mx:
        yield n
        n *= 2

def run(rank, mx, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device("cuda", rank))
    peer = 1 - rank
    buf = torch.zeros(mx, dtype=torch.uint8, device="cuda")
    ack = torch.zeros(4, dtype=torch.uint8, device="cuda")
    win = 64
    if rank == 0:
        print("# NCCL (PyTorch %s) bw, MB/s" % torch.__version__)
    for s in sizes(mx):
        it = 20 if s > 8192 else 100
        b = buf[:s]
        for phase in range(2):
            n = 2 if phase == 0 else it
            torch.cuda.synchronize(); dist.barrier()
            t0 = time.perf_counter()
            for _ in range(n):
                ops = [dist.P2POp(dist.isend if rank == 0 else dist.irecv, b, peer) for _ in range(win)]
                for r in dist.batch_isend_irecv(ops):
                    r.wait()
                if rank == 0:
                    dist.recv(ack, peer)
                else:
                    dist.send(ack, peer)
            torch.cuda.synchronize()
            el = time.perf_counter() - t0
        if rank == 0:
            print("%-10d%18.2f" % (s, s * win * it / el / 1e6), flush=True)
    if rank == 0:
        print("# NCCL latency, us")
    for s in sizes(min(mx, 4 << 20)):
        it = 1000 if s <= 8192 else 100
        b = buf[:s]
        for phase in range(2):
            n = 10 if phase == 0 else it
            torch.cuda.synchronize(); dist.barrier()
            t0 = time.perf_counter()
            for _ in range(n):
                if rank == 0:
                    dist.send(b, peer); dist.recv(b, peer)
                else:
                    dist.recv(b, peer); dist.send(b, peer)
            torch.cuda.synchronize()
            el = time.perf_counter() - t0
        if rank == 0:
            print("%-10d%18.2f" % (s, el * 1e6 / (2 * it)), flush=True)
    dist.destroy_process_group()

if __name__ == "__main__":
    mx = int(sys.argv[1]) if len(sys.argv) > 1 else 256 << 20
    mp.spawn(run, args=(mx, 29511), nprocs=2)
