"""`make train-smoke`: a few GRPO steps of TRL itself with FixOSToolEnv as ``environment_factory``,
against live hosts; not part of CI (it installs torch, transformers and TRL, ~1 GB).

    python scripts/train_smoke.py [--steps 3] [--task easy_1]

First, a separate environment, .venv/train: FixOS (editable) with torch (CPU), TRL and
transformers at the versions below, installed again only when they or pyproject.toml change.
Then, in that environment (``--inside``), a tiny Qwen3-shaped causal LM with random weights
and a byte-level BPE tokenizer trained here on the prompt texts (nothing is downloaded), with
TRL's own Qwen3 chat template so that TRL's own response parser reads its tool calls.

A random model never writes a parseable tool call, so generation is steered: the model's
``generate`` adds a logits processor that, in every other rollout of a group, forces the text
of one call, ``<tool_call>{"name": "run", "arguments": {"command": "service nginx start"}}
</tool_call>``, and lets the other rollout sample freely (the tool-call tokens banned). Only
the tokens are forced: TRL parses the completion, calls the environment's ``run``, appends its
output and asks the model to go on, as for any model; the reward is the verifier's
(``get_reward``). The smoke fails (exit 1) unless every step ran, at least one ``run`` call went
through TRL to a live host, the rollouts with a call scored above those without, and nothing this
process made (host, network, judge) is left in the engine.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv" / "train"  # inside .venv: tools that hash the checkout (openenv validate) skip it
TORCH = os.environ.get("TORCH_SPEC", "torch==2.13.*")
"""A CPU build where the machine's pip configuration has one (here: a local wheel,
2.13.0+cpu); elsewhere point pip at PyTorch's CPU wheel index (PIP_EXTRA_INDEX_URL) or the
CUDA build comes with its ~3 GB of libraries."""
PINS = [TORCH, "trl==1.16.0", "transformers==5.25.0", "jmespath>=1.0"]
"""TRL >= 1.x: GRPOTrainer(environment_factory=...) with get_reward; transformers >= 5.13 for
the response templates TRL parses tool calls with; jmespath for that parser."""
COMMAND = "service nginx start"
"""easy_1's repair: the one command the steered rollouts call ``run`` with."""


# -- outside: the environment ----------------------------------------------------------


def ensure_venv() -> Path:
    """.venv/train with FixOS and PINS, installed again only when either changed."""
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + "\n".join(PINS).encode()).hexdigest()
    stamp = VENV / ".fixos-train.sha256"
    python = VENV / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text().strip() == want:
        print(f"[train-smoke] {VENV.name} ready")
        return python
    print(f"[train-smoke] installing FixOS, {', '.join(PINS)} into {VENV.name} (a few minutes, ~1 GB)")
    started = time.monotonic()
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e", str(ROOT), *PINS]
    done = subprocess.run(pip, capture_output=True, text=True)
    if done.returncode:
        # a machine's pip configuration may name package folders it lacks: one warning a package
        noise = "is ignored: it is neither a file nor a directory"
        sys.stderr.write("".join(line for line in done.stderr.splitlines(True) if noise not in line))
        raise SystemExit(f"train-smoke: pip could not install into {VENV} (its output above)")
    stamp.write_text(want + "\n")
    print(f"[train-smoke] {VENV.name} installed in {time.monotonic() - started:.0f} s")
    return python


# -- inside: the model, the tokenizer and the trainer ----------------------------------


def build_tokenizer(corpus: list[str]):
    """A byte-level BPE trained on ``corpus``, with Qwen's special tokens and TRL's copy of
    Qwen3's chat template, which TRL recognises and knows how to parse tool calls from."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_chat_template

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=2000,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus, trainer)
    # as in Qwen's tokenizer: single tokens, but not special ones (decoding keeps them)
    tags = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
    bpe.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in tags])
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=qwen3_chat_template,
    )


def build_model(tokenizer):
    """Two layers of a Qwen3 shape with random weights (0.12 M parameters), whose ``generate``
    takes the steering below."""
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList, Qwen3Config, Qwen3ForCausalLM

    forced_call = tokenizer.encode(
        f'<tool_call>\n{{"name": "run", "arguments": {{"command": "{COMMAND}"}}}}\n</tool_call><|im_end|>',
        add_special_tokens=False,
    )
    after_tool = tokenizer.encode("Started nginx.<|im_end|>", add_special_tokens=False)
    banned = [tokenizer.convert_tokens_to_ids(t) for t in ("<tool_call>", "<|im_start|>", "<tool_response>")]

    class Steer(LogitsProcessor):
        """Per row of one ``generate`` call: a token sequence to force, or None to sample freely."""

        def __init__(self, plans: list[list[int] | None], prompt_length: int) -> None:
            self.plans, self.prompt_length = plans, prompt_length

        def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
            step = input_ids.shape[1] - self.prompt_length
            for row, plan in enumerate(self.plans):
                if plan is None:
                    scores[row, banned] = -float("inf")
                    continue
                token = plan[step] if step < len(plan) else tokenizer.eos_token_id
                scores[row] = -float("inf")
                scores[row, token] = 0.0
            return scores

    class SteeredQwen3(Qwen3ForCausalLM):
        tool_responses: list[str] = []
        """what TRL appended after a call, as the model read it on its next turn"""
        on_generate = staticmethod(lambda: None)

        def generate(self, input_ids=None, **kwargs):
            self.on_generate()
            plans: list[list[int] | None] = []
            for row, ids in enumerate(input_ids.tolist()):
                text = tokenizer.decode([i for i in ids if i != tokenizer.pad_token_id])
                if "<tool_response>" in text:  # TRL ran the tool: the turn after it
                    response = text.rsplit("<tool_response>", 1)[1].split("</tool_response>", 1)[0]
                    type(self).tool_responses.append(response.strip())
                    plans.append(after_tool)
                elif row % 2 == 0:  # half of each group calls the tool, the other half does not
                    plans.append(forced_call)
                else:
                    plans.append(None)
            processors = LogitsProcessorList(kwargs.pop("logits_processor", None) or [])
            processors.append(Steer(plans, input_ids.shape[1]))
            return super().generate(input_ids=input_ids, logits_processor=processors, **kwargs)

    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    return SteeredQwen3(config)


def leftovers() -> list[str]:
    """Containers (hosts, judges), networks and volumes this process made that are still there."""
    from fixos.stack.engine import connect
    from fixos.stack.hosts import LABEL_OWNER
    from fixos.stack.names import owner_label

    mine = {"label": f"{LABEL_OWNER}={owner_label()}"}
    with contextlib.closing(connect()) as client:
        found = [f"container {c.name}" for c in client.containers.list(all=True, filters=mine)]
        found += [f"network {n.name}" for n in client.networks.list(filters=mine)]
        found += [f"volume {v.name}" for v in client.volumes.list(filters=mine)]
    return found


def smoke(steps: int, task: str) -> int:
    started = time.monotonic()  # imports included: torch's and TRL's take seconds
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    # transformers' own deprecations, raised by TRL's calls into it: not this smoke's business
    warnings.filterwarnings("ignore", category=FutureWarning)
    import resource

    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.utils import get_json_schema
    from trl import GRPOConfig, GRPOTrainer

    from fixos.scenarios.catalog import load_catalog
    from fixos.training.trl import FixOSToolEnv, close

    torch.set_num_threads(1)  # a tiny model; the machine is shared
    made: list[FixOSToolEnv] = []

    def factory() -> FixOSToolEnv:
        """FixOSToolEnv itself (TRL keeps a pool of them); the list lets the smoke read verdicts."""
        env = FixOSToolEnv()
        made.append(env)
        return env

    judged: list[dict] = []
    verdicts: list[dict] = []

    class Verdicts(TrainerCallback):
        """After each step (its rewards computed), every rollout's environment: its steps and reward."""

        def on_step_end(self, args, state, control, **kwargs):
            for env in made:
                if env.verdict is not None and not any(env.verdict is seen for seen in verdicts):
                    verdicts.append(env.verdict)
                    judged.append({"step": state.global_step, "runs": env.steps, "reward": env.reward})

    instruction = load_catalog()[task].instruction
    probe = FixOSToolEnv()
    tools = [get_json_schema(probe.run), get_json_schema(probe.report)]
    # what the prompts and the steered replies say, so the vocabulary covers them compactly
    corpus = [instruction, json.dumps(tools), COMMAND, "Started nginx.", '{"name": "run", "arguments": {}}']
    tokenizer = build_tokenizer(corpus * 20)
    model = build_model(tokenizer)
    held: list[int] = []
    model.on_generate = lambda: held.append(len(leftovers()))  # hosts are live while it generates
    print(
        f"[train-smoke] model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters, "
        f"vocabulary {len(tokenizer)}, torch {torch.__version__}"
    )
    rows = Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": ""}] for _ in range(steps)],
            "task_id": [task] * steps,
            "seed": list(range(1, steps + 1)),
        }
    )
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    with tempfile.TemporaryDirectory(prefix="fixos-train-smoke-") as out:
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            train_dataset=rows,
            environment_factory=factory,
            callbacks=[Verdicts()],
            args=GRPOConfig(
                output_dir=out,
                max_steps=steps,
                num_generations=2,
                per_device_train_batch_size=2,
                max_completion_length=256,
                learning_rate=1e-3,
                logging_steps=1,
                save_strategy="no",
                report_to="none",
                use_cpu=True,
                seed=0,
                disable_tqdm=True,
            ),
        )
        try:
            trainer.train()
        finally:
            for env in made:  # judged rollouts are freed already; this frees any a failure left
                close(env)
    wall = time.monotonic() - started
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    left = leftovers()
    moved = max((p.detach() - before[name]).abs().max().item() for name, p in model.named_parameters())

    logged = [entry for entry in trainer.state.log_history if "tools/call_frequency" in entry]
    trl_calls = sum(round(e["tools/call_frequency"] * 2) for e in logged)  # per completion, 2 a step
    with_call = [j["reward"] for j in judged if j["runs"]]
    without = [j["reward"] for j in judged if not j["runs"]]
    print(f"[train-smoke] GRPO steps run: {trainer.state.global_step} of {steps} ({task}, 2 rollouts a step)")
    print(f"[train-smoke] tool calls dispatched by TRL: {trl_calls} (TRL's tools/call_frequency)")
    print(f"[train-smoke] run calls that reached a live host: {sum(j['runs'] for j in judged)}")
    for response in model.tool_responses[:1]:
        print(f"[train-smoke] what TRL appended after `run {COMMAND!r}`: {response!r}")
    for j in judged:
        call = f"run({COMMAND!r})" if j["runs"] else "no tool call"
        print(f"[train-smoke]   step {j['step']}: {call:32} reward {j['reward']:.2f}")
    print(f"[train-smoke] TRL's mean reward per step: {[round(e['reward'], 2) for e in logged]}")
    print(f"[train-smoke] the weights moved: largest change {moved:.2e}")
    print(f"[train-smoke] wall time (model, tokenizer, training, judging): {wall:.1f} s")
    print(f"[train-smoke] peak memory (RSS of this process): {peak_mib:.0f} MiB")
    print(
        f"[train-smoke] objects of this process in the engine: up to {max(held, default=0)} while "
        f"generating (hosts, networks, judges), {len(left)} after: {left or 'nothing'}"
    )

    failures = []
    if trainer.state.global_step != steps:
        failures.append(f"{trainer.state.global_step} steps ran, not {steps}")
    if not trl_calls or not with_call:
        failures.append("no run call went through TRL to a live host")
    if len(judged) != 2 * steps:
        failures.append(f"{len(judged)} rollouts were judged, not {2 * steps}")
    if not without or (with_call and min(with_call) <= max(without)):
        failures.append(f"the call did not change the reward: {with_call} with it, {without} without")
    if not moved:
        failures.append("the optimiser did not change the weights")
    if left:
        failures.append(f"left behind: {', '.join(left)}")
    for failure in failures:
        print(f"[train-smoke] FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps (2 live rollouts each)")
    parser.add_argument("--task", default="easy_1", help="a scenario that `service nginx start` repairs")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        return smoke(args.steps, args.task)
    started = time.monotonic()
    python = ensure_venv()
    argv = [str(python), __file__, "--inside", "--steps", str(args.steps), "--task", args.task]
    code = subprocess.run(argv).returncode
    print(f"[train-smoke] {'passed' if code == 0 else 'FAILED'} in {time.monotonic() - started:.0f} s in all")
    return code


if __name__ == "__main__":
    sys.exit(main())
