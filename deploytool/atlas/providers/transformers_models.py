"""Hugging Face transformers architectures as atlas architectures, each built from its own config class with
random weights (`Model(Config(...))`, nothing downloaded): BERT-family text encoders with a classification head,
vision transformers, a Whisper encoder and a wav2vec2 audio classifier, and a GPT-2 decoder at a fixed length.
Each is wrapped so it takes plain tensors and returns its one output tensor (logits, or the encoder's hidden
states), which is what torch.export and every converter take. transformers and torch are imported inside the
builders, torchvision first: transformers imports it when it is installed (see torchvision_models)."""

from __future__ import annotations

from typing import Any

from deploytool.atlas.architecture import Architecture, Size, register
from deploytool.atlas.providers.torchvision_models import import_torchvision

QUICK_TEXT = {"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
              "intermediate_size": 128, "max_position_embeddings": 64}
BASE_TEXT = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
             "intermediate_size": 3072, "max_position_embeddings": 512}
QUICK_SEQ, FULL_SEQ = 32, 128
QUICK_CLASSES = 4
# The encoder and decoder without a classifier to rescale (their outputs are raw): weights drawn 5x wider than the
# configs' 0.02, else Whisper's sinusoidal positions drown its input (outputs vary by 2% across samples; 47% here)
WIDE_INIT_STD = 0.1


def _transformers() -> Any:
    import_torchvision()
    import transformers

    return transformers


def _wrapped(model: Any, output: str, keys: tuple[str, ...]) -> Any:
    """`model` as a module of plain tensors returning its `output` tensor: `forward(x)` for one input (a test set's
    `x`), `forward(input_ids, attention_mask)` for tokens; the exported program's inputs take these names."""
    import torch

    class One(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, x: Any) -> Any:
            return getattr(self.model(**{keys[0]: x}), output)

    class Tokens(One):
        def forward(self, input_ids: Any, attention_mask: Any) -> Any:  # type: ignore[override]
            return getattr(self.model(input_ids=input_ids, attention_mask=attention_mask), output)

    return (Tokens() if keys == ("input_ids", "attention_mask") else One()).eval()


def _text_classifier(kind: str, size: Size) -> Any:
    transformers = _transformers()

    p = dict(size.params)
    classes = p.pop("classes")
    config_cls, model_cls = {
        "bert": (transformers.BertConfig, transformers.BertForSequenceClassification),
        "distilbert": (transformers.DistilBertConfig, transformers.DistilBertForSequenceClassification),
        "roberta": (transformers.RobertaConfig, transformers.RobertaForSequenceClassification),
        "albert": (transformers.AlbertConfig, transformers.AlbertForSequenceClassification),
        "electra": (transformers.ElectraConfig, transformers.ElectraForSequenceClassification),
    }[kind]
    if kind == "distilbert":  # its own words for the same sizes
        p = {"vocab_size": p["vocab_size"], "dim": p["hidden_size"], "n_layers": p["num_hidden_layers"],
             "n_heads": p["num_attention_heads"], "hidden_dim": p["intermediate_size"],
             "max_position_embeddings": p["max_position_embeddings"]}
    if kind == "albert":
        p["embedding_size"] = min(128, p["hidden_size"])
    if kind == "roberta":
        p["max_position_embeddings"] += 2  # positions start after the padding index
    config = config_cls(**p, num_labels=classes, attn_implementation="eager")
    return _wrapped(model_cls(config).eval(), "logits", ("input_ids", "attention_mask"))


def _vit(size: Size) -> Any:
    transformers = _transformers()

    p = dict(size.params)
    classes = p.pop("classes")
    config = transformers.ViTConfig(**p, image_size=size.input_shape[1], num_labels=classes,
                                    attn_implementation="eager")
    return _wrapped(transformers.ViTForImageClassification(config).eval(), "logits", ("pixel_values",))


def _whisper_encoder(size: Size) -> Any:
    transformers = _transformers()

    p = size.params
    bins, frames = size.input_shape
    config = transformers.WhisperConfig(d_model=p["d_model"], encoder_layers=p["layers"], decoder_layers=1,
                                        encoder_attention_heads=p["heads"], decoder_attention_heads=p["heads"],
                                        encoder_ffn_dim=p["ffn"], decoder_ffn_dim=p["ffn"], num_mel_bins=bins,
                                        max_source_positions=frames // 2, attn_implementation="eager",
                                        init_std=WIDE_INIT_STD)
    encoder = transformers.WhisperModel(config).get_encoder().eval()
    return _wrapped(encoder, "last_hidden_state", ("input_features",))


def _wav2vec2(size: Size) -> Any:
    transformers = _transformers()

    p = size.params
    config = transformers.Wav2Vec2Config(
        hidden_size=p["hidden"], num_hidden_layers=p["layers"], num_attention_heads=p["heads"],
        intermediate_size=p["hidden"] * 2 if p["hidden"] < 768 else 3072, conv_dim=p["conv"],
        conv_kernel=(10, 3, 3, 3, 3, 2, 2)[: len(p["conv"])], conv_stride=(5, 2, 2, 2, 2, 2, 2)[: len(p["conv"])],
        num_conv_pos_embeddings=p["pos_kernel"], num_conv_pos_embedding_groups=p["pos_groups"],
        num_labels=p["classes"], do_stable_layer_norm=False, attn_implementation="eager")
    return _wrapped(transformers.Wav2Vec2ForSequenceClassification(config).eval(), "logits", ("input_values",))


def _gpt2(size: Size) -> Any:
    transformers = _transformers()

    p = size.params
    config = transformers.GPT2Config(vocab_size=p["vocab"], n_positions=size.input_shape[0], n_embd=p["dim"],
                                     n_layer=p["layers"], n_head=p["heads"], use_cache=False,
                                     attn_implementation="eager", initializer_range=WIDE_INIT_STD)
    return _wrapped(transformers.GPT2LMHeadModel(config).eval(), "logits", ("input_ids", "attention_mask"))


def _text(kind: str) -> None:
    register(Architecture(
        name=f"transformers/{kind}", family="text-encoder", provider="transformers", input_kind="tokens",
        quick=Size({**QUICK_TEXT, "classes": QUICK_CLASSES}, (QUICK_SEQ,)),
        full=Size({**BASE_TEXT, "classes": 2}, (FULL_SEQ,), 48),
        build=lambda s: _text_classifier(kind, s),
        test_set="random token ids of varied lengths (attention mask pads the rest)"))


for _kind in ("bert", "distilbert", "roberta", "albert", "electra"):
    _text(_kind)

register(Architecture(
    name="transformers/vit", family="vision-transformer", provider="transformers", input_kind="image",
    quick=Size({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128,
                "patch_size": 16, "classes": 10}, (3, 64, 64)),
    full=Size({"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
               "patch_size": 16, "classes": 1000}, (3, 224, 224), 64),
    build=_vit, test_set="smooth random colour fields (normalised)"))

register(Architecture(
    name="transformers/whisper_encoder", family="audio", provider="transformers", input_kind="audio-features",
    # whisper-base's encoder at full size: 80 mel bins x 3000 frames (30 s)
    quick=Size({"d_model": 64, "layers": 2, "heads": 2, "ffn": 128}, (80, 200)),
    full=Size({"d_model": 512, "layers": 6, "heads": 8, "ffn": 2048}, (80, 3000), 16),
    build=_whisper_encoder, test_set="log-mel-like spectrograms of rising and falling tones"))

register(Architecture(
    name="transformers/wav2vec2", family="audio", provider="transformers", input_kind="waveform",
    quick=Size({"hidden": 64, "layers": 2, "heads": 2, "conv": (32, 32, 32, 32, 32), "pos_kernel": 16,
                "pos_groups": 4, "classes": QUICK_CLASSES}, (8000,)),
    full=Size({"hidden": 768, "layers": 12, "heads": 12, "conv": (512,) * 7, "pos_kernel": 128, "pos_groups": 16,
               "classes": 12}, (16000,), 32),
    build=_wav2vec2, test_set="waveforms of mixed tones at 16 kHz"))

register(Architecture(
    name="transformers/gpt2", family="decoder", provider="transformers", input_kind="tokens",
    quick=Size({"vocab": 1000, "dim": 64, "layers": 2, "heads": 2}, (QUICK_SEQ,)),
    full=Size({"vocab": 50257, "dim": 768, "layers": 12, "heads": 12}, (FULL_SEQ,), 16),
    build=_gpt2, test_set="random token ids of varied lengths; a fixed length, next-token logits at every position"))
