"""convred inside a DistributedDataParallel model, one process per GPU, the batch sharded across them.

    torchrun --standalone --nproc_per_node=NUM_GPUS examples/python/ddp_example.py [--check] [--math tf32]

Each rank builds the same model (seeded: identical weights), wraps it in DDP, and trains a few steps on
its shard of every global batch (DistributedSampler-style slicing: rank r takes images r, r+W, ...).
With --check (two or more GPUs), before training: every rank runs its shard of a fixed batch forward and
backward, the outputs are all-gathered, and rank 0 compares them with the whole batch run on one GPU
without DDP (outputs bitwise equal; DDP-averaged weight gradients equal to the single-GPU gradient of the
same mean loss within 1e-3 relative: cuDNN may pick other algorithms for other batch sizes). Prints "ddp check: PASSED" or "FAILED" and exits non-zero on failure.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import convred


class Net(nn.Module):
    """conv -> *2 -> min over channels (fused by convred) -> a tiny head."""

    def __init__(self, math):
        super().__init__()
        self.features = convred.nn.Conv2dReduce(16, 64, 3, padding=1, scale=2.0, reduce="min", math=math)
        self.head = nn.Linear(32 * 32, 10)

    def forward(self, x):
        y = self.features(x)  # (N, 1, 32, 32)
        return self.head(y.flatten(1))


def shard(t, rank, world):
    return t[rank::world].contiguous()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--math", default="tf32")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32, help="global batch (a multiple of the world size)")
    ap.add_argument("--cpu", action="store_true", help="gloo on CPU processes (the CPU reference kernel): "
                    "checks the example's own logic on a machine without GPUs")
    a = ap.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast
    dist.init_process_group("gloo" if a.cpu else "nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    if a.cpu:
        dev = torch.device("cpu")
    else:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    torch.manual_seed(0)
    model = Net(a.math).to(dev)
    ddp = DDP(model) if a.cpu else DDP(model, device_ids=[local])
    if rank == 0:
        print(f"world {world}; kernel: {model.features.kernel_for(torch.rand(2, 16, 32, 32, device=dev))}")

    failed = False
    if a.check:
        g = torch.Generator().manual_seed(1)
        x = torch.rand(a.batch, 16, 32, 32, generator=g).to(dev)
        target = torch.randint(0, 10, (a.batch,), generator=g).to(dev)
        # single-GPU run of the whole batch (every rank computes it; rank 0 compares)
        single = Net(a.math).to(dev)
        single.load_state_dict(model.state_dict())
        out_single = single(x)
        nn.functional.cross_entropy(out_single, target).backward()
        feat_single = single.features(x).detach()
        # sharded DDP run
        xs, ts = shard(x, rank, world), shard(target, rank, world)
        out = ddp(xs)
        nn.functional.cross_entropy(out, ts).backward()  # DDP averages over ranks = the global mean loss
        feat = model.features(xs).detach()
        gathered = [torch.empty_like(feat) for _ in range(world)]
        dist.all_gather(gathered, feat)
        full = torch.empty_like(feat_single)
        for r in range(world):
            full[r::world] = gathered[r]
        same = torch.equal(full, feat_single)
        gdiff = max((p.grad - q.grad).abs().max().item() / q.grad.abs().max().clamp_min(1e-30).item()
                    for p, q in zip(model.parameters(), single.parameters()))
        ok = torch.tensor([int(same and gdiff < 1e-3)], device=dev)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        if rank == 0:
            print(f"ddp check: gathered output == single-GPU output: {same} "
                  f"(max |diff| {(full - feat_single).abs().max().item():.3g}); "
                  f"max relative gradient difference {gdiff:.3g}")
            print("ddp check: PASSED" if ok.item() else "ddp check: FAILED")
        failed = not ok.item()
        model.zero_grad(set_to_none=True)

    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(2)
    for step in range(a.steps):
        x = torch.rand(a.batch, 16, 32, 32, generator=g).to(dev)
        target = torch.randint(0, 10, (a.batch,), generator=g).to(dev)
        loss = nn.functional.cross_entropy(ddp(shard(x, rank, world)), shard(target, rank, world))
        opt.zero_grad()
        loss.backward()
        opt.step()  # changes the weight in place: the module re-packs its filter on the next forward
        lt = loss.detach().clone()
        dist.all_reduce(lt)
        if rank == 0:
            print(f"step {step}: loss {lt.item() / world:.4f}; filter packed {model.features.pack_count} times")
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
