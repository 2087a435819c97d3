"""Continue training an exported GPT-2 folder with PyTorch, in one process or several (torchrun).

    python docs/train_gpt2.py runs/gpt-hf --data corpus.txt --out runs/gpt-hf-more
    torchrun --nproc_per_node 2 docs/train_gpt2.py runs/gpt-hf --data corpus.txt --out ...

Under torchrun every process draws its own batches and DistributedDataParallel averages the
gradients, so all processes keep the same weights; process 0 saves them with save_pretrained.
docs/huggingface.md walks through it.
"""

import argparse
import os
import shutil
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from transformers import GPT2LMHeadModel

from tinytorch.text.tokenization import BPETokenizer, CharTokenizer

TOKENIZER = "tinytorch_tokenizer.json"


def load_tokenizer(path: Path):
    """The tinytorch tokenizer saved beside the model (a character or a BPE one)."""
    try:
        return CharTokenizer.load(path)
    except ValueError:
        return BPETokenizer.load(path)


def token_ids(tokenizer, text: str) -> torch.Tensor:
    if isinstance(tokenizer, CharTokenizer):  # characters the model never saw have no id
        known = set(tokenizer.chars)
        text = "".join(ch for ch in text if ch in known)
    return torch.tensor(tokenizer.encode(text), dtype=torch.long)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the exported folder (tito model export)")
    parser.add_argument("--data", type=Path, required=True, help="UTF-8 text to train on")
    parser.add_argument("--out", type=Path, required=True, help="where to save the result")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16, help="per process")
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    distributed = "RANK" in os.environ  # torchrun sets RANK, WORLD_SIZE and LOCAL_RANK
    if distributed:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{os.environ.get('LOCAL_RANK', 0)}" if cuda else "cpu")

    model = GPT2LMHeadModel.from_pretrained(args.folder).to(device).train()
    tokenizer = load_tokenizer(args.folder / TOKENIZER)
    ids = token_ids(tokenizer, args.data.read_text(encoding="utf-8"))
    context = model.config.n_positions
    trained = DistributedDataParallel(model) if distributed else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    batches = torch.Generator().manual_seed(rank)  # each process its own windows of the text

    began = time.perf_counter()
    for step in range(1, args.steps + 1):
        starts = torch.randint(0, len(ids) - context, (args.batch_size,), generator=batches)
        x = torch.stack([ids[s : s + context] for s in starts.tolist()]).to(device)
        loss = trained(input_ids=x, labels=x).loss  # the model shifts the labels by one itself
        optimizer.zero_grad()
        loss.backward()  # under DDP the gradients are averaged over processes here
        optimizer.step()
        if rank == 0 and (step % 50 == 0 or step == args.steps):
            print(f"step {step}  loss {loss.item():.3f}  ({world} process(es))", flush=True)
    if rank == 0:
        model.save_pretrained(args.out)
        shutil.copy(args.folder / TOKENIZER, args.out / TOKENIZER)
        seconds = time.perf_counter() - began
        print(f"saved {args.out} after {args.steps} steps in {seconds:.1f} s", flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
