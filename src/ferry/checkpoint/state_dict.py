"""Load a state_dict into a module whatever wrapper prefixes either side carries, and report every mismatch.

Wrappers leak their attribute names into state_dict keys: ``module.`` (``nn.DataParallel``, DDP), ``_orig_mod.``
(``torch.compile``), ``_fsdp_wrapped_module.`` and ``_checkpoint_wrapped_module.``. Both the checkpoint's keys
and the module's keys are put in a canonical form with those segments removed, matched on it, and loaded under
the module's real names, so a checkpoint saved from a wrapper loads into the bare model and the other way round.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, cast

import torch
from torch import nn
from torch.nn.modules.batchnorm import _NormBase
from torch.nn.parameter import is_lazy

from ferry._remote import is_url
from ferry._remote_path import RemotePath
from ferry.checkpoint.folder import STATE_FILE, has_shards
from ferry.devices import DeviceLike, resolve_device
from ferry.errors import ArgumentError, CheckpointError, StateDictMismatchError
from ferry.placement.deferred import fill

__all__ = ["LoadReport", "ShapeMismatch", "load_state_dict"]

# Attribute names that wrappers give the module they wrap. ``module`` is a common name for a real child too, so it
# only counts as a wrapper at the start of a key or right after another wrapper segment; the others count anywhere.
_WRAPPERS_ANYWHERE = frozenset({"_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module"})
_EXTRA_STATE = "_extra_state"  # the key suffix nn.Module uses for get_extra_state()/set_extra_state()
_LIST_LIMIT = 10  # keys shown per group by str(report); the error message lists them all
_FULL_SCAN = 20_000  # key pairs difflib compares in full when suggesting (about 15 µs a pair)
_COMMON_SEGMENT = 64  # a dotted segment in more candidates than this ("weight", "0") does not shortlist them
_SHORTLIST = 16  # candidates difflib compares per key past _FULL_SCAN


class ShapeMismatch(NamedTuple):
    """A key on both sides whose tensors differ in shape; it is skipped, never loaded.

    Attributes:
        key: The module's key.
        expected: The shape of the module's parameter or buffer.
        got: The shape of the tensor in the source.
    """

    key: str
    expected: tuple[int, ...]
    got: tuple[int, ...]


@dataclass(frozen=True)
class LoadReport:
    """What :func:`load_state_dict` loaded and what did not fit.

    Attributes:
        missing: Module keys the source has no value for.
        unexpected: Source keys that were not used.
        mismatched: Keys on both sides with different shapes (skipped).
        suggestions: Each missing or unexpected key mapped to the closest key on the other side, where one is close.
        loaded: Module keys that received a value.
        renamed: Source key -> module key, for every key matched through a wrapper prefix (``module.`` etc.).
        notes: Human-readable notes on what was done, e.g. ``"stripped 'module.' from 4 keys"``.
    """

    missing: list[str]
    unexpected: list[str]
    mismatched: list[ShapeMismatch]
    suggestions: dict[str, str]
    loaded: list[str]
    renamed: dict[str, str]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when nothing is missing, unexpected or mis-shaped (what ``strict=True`` demands)."""
        return not (self.missing or self.unexpected or self.mismatched)

    def __str__(self) -> str:
        return self.describe(limit=_LIST_LIMIT)

    def describe(self, *, limit: int | None = None) -> str:
        """Return a summary line, the notes, and the offending keys grouped by kind.

        Args:
            limit: Keys shown per group; ``None`` shows them all.

        Returns:
            Several lines of text, without a trailing newline.
        """
        total = len(self.loaded) + len(self.mismatched) + len(self.missing)
        lines = [
            f"loaded {len(self.loaded)} of {total} keys; {len(self.missing)} missing, "
            f"{len(self.unexpected)} unexpected, {len(self.mismatched)} shape mismatch"
            f"{'' if len(self.mismatched) == 1 else 'es'}"
        ]
        lines += [f"note: {note}" for note in self.notes]
        groups: list[tuple[str, list[str]]] = [
            ("missing from the source", [self._with_suggestion(key) for key in self.missing]),
            ("unexpected in the source", [self._with_suggestion(key) for key in self.unexpected]),
            (
                "shape mismatch (module expects, source has)",
                [f"{m.key}: {_shape(m.expected)} vs {_shape(m.got)}" for m in self.mismatched],
            ),
        ]
        for title, items in groups:
            if not items:
                continue
            lines.append(f"{title} ({len(items)}):")
            shown = items if limit is None else items[:limit]
            lines += [f"  {item}" for item in shown]
            if len(shown) < len(items):
                lines.append(f"  ... and {len(items) - len(shown)} more")
        return "\n".join(lines)

    def _with_suggestion(self, key: str) -> str:
        closest = self.suggestions.get(key)
        return key if closest is None else f"{key}  (closest: {closest})"


def load_state_dict(
    module: nn.Module,
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    strict: bool = True,
    device: DeviceLike | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> LoadReport:
    """Load ``source`` into ``module``, adding or stripping wrapper prefixes, and report everything that did not fit.

    Keys are matched exactly first, then with the wrapper segments ``module.`` (``nn.DataParallel``/DDP),
    ``_orig_mod.`` (``torch.compile``), ``_fsdp_wrapped_module.`` and ``_checkpoint_wrapped_module.`` removed from
    both sides, in any order and nesting. So a checkpoint saved from ``nn.DataParallel(model)`` loads into
    ``model``, and a plain checkpoint loads into ``nn.DataParallel(model)`` or ``torch.compile(model)``. A key whose
    canonical form is ambiguous (two keys on one side reduce to it) is not guessed: it is reported.

    Values are loaded by the module's own :meth:`torch.nn.Module.load_state_dict` under the module's real key names,
    so custom ``_load_from_state_dict`` hooks run, and the source's ``_metadata`` (module versions) is renamed along
    with the keys. Like PyTorch, a BatchNorm ``num_batches_tracked`` absent from a checkpoint without version
    metadata is not reported missing: BatchNorm fills it in.

    Devices: every value is copied into the existing parameter or buffer it loads into, so it lands on that
    tensor's device and takes its dtype, whatever device the source tensor is on. A parameter or buffer on
    ``meta`` has no storage to copy into: it is replaced by the value (as ``assign=True`` does), cast to its
    dtype and left on the source tensor's device (the CPU for a path), so a model built on ``meta`` can be
    materialised from a checkpoint. Values from a mapping are copied before being assigned, so the module never
    shares memory with the caller's tensors. ``requires_grad`` is always kept from the module.

    Args:
        module: The module to load into, bare or wrapped, on any device (also ``meta``).
        source: A state_dict (a mapping of key to tensor), or the path of a file that :func:`ferry.load` reads
            (a ferry checkpoint, a safetensors file, or a ``torch.save`` file through the restricted unpickler),
            loaded onto the CPU and then copied into the module. A Checkpointer checkpoint (its step folder, its
            ``state.safetensors``, or what ``ferry.load`` read from it) gives its one module state_dict; with
            several modules the message names the entry to pick.
        strict: Mirrors ``Module.load_state_dict``: when true, any missing, unexpected or mis-shaped key raises
            and nothing is loaded. When false, every key that matches with the same shape is loaded and the rest
            is listed in the returned report; mis-shaped keys are skipped.
        device: Where the module's tensors end up (``"cuda:0"``, ``"cpu"``...). A parameter or buffer on
            ``meta`` (a model built under :func:`ferry.deferred_init` or ``torch.device("meta")``) is then read
            from a ferry or safetensors file straight into new memory on ``device``: no copy of the model in host
            memory on the way (an accelerator is filled through one reused pinned buffer of 64 MiB), every
            checksum verified as it is read, shared (tied) tensors read once and still shared. What the file does
            not hold (non-persistent buffers such as RoPE's ``inv_freq``, keys missing with ``strict=False``) is
            made as :func:`ferry.materialize` makes it; tensors already real are moved to ``device``. A
            ``torch.save`` file or a mapping is copied tensor by tensor the same way. Custom
            ``_load_from_state_dict`` hooks do not run with ``device`` (values are placed, not handed to
            ``Module.load_state_dict``). ``None`` (the default): every value lands on its parameter's device, as
            described above.
        storage_options: For a ``source`` that is a URL of object storage (``s3://bucket/run/model.safetensors``):
            passed to its fsspec file system, as for :func:`ferry.load`.

    Returns:
        A :class:`LoadReport` of what was loaded, renamed, missing, unexpected and mis-shaped.

    Raises:
        StateDictMismatchError: ``strict`` is true and a key is missing, unexpected or mis-shaped; the message lists
            every one, and ``.report`` holds the :class:`LoadReport`. Nothing was loaded.
        CheckpointError: ``source`` is not a mapping of names to tensors (for instance a whole training checkpoint
            such as ``{"model": ..., "optimizer": ...}``: the message names the entry to pass), or it holds
            ``meta`` tensors (no values) for parameters that have storage; also whatever :func:`ferry.load`
            raises for a path.
        InitializationError: with ``device``, a tensor neither the file, nor a recorded construction, nor
            ``reset_parameters()`` fills (see :func:`ferry.materialize`).
        DeviceError: ``device`` is not available on this machine.
        TypeError: ``module`` is not an ``nn.Module``.

    Example:
        >>> import torch
        >>> from torch import nn
        >>> saved = nn.DataParallel(nn.Linear(2, 1)).state_dict()  # keys "module.weight", "module.bias"
        >>> report = load_state_dict(nn.Linear(2, 1), saved)
        >>> report.ok, report.notes
        (True, ("stripped 'module.' from 2 keys",))
    """
    if not isinstance(module, nn.Module):
        raise ArgumentError(
            f"load_state_dict() needs an nn.Module first, got {type(module).__name__}. "
            "Call it as load_state_dict(model, state_dict_or_path)."
        )
    path = None
    owned = False
    target_device = None if device is None else resolve_device(device)
    if target_device is not None and target_device.type == "meta":
        raise ArgumentError(
            "load_state_dict(..., device='meta') would leave the module without values. Name the device its "
            "tensors should live on: ferry.load_state_dict(model, path, device='cuda') (or 'cpu')."
        )
    lazy: _LazyFile | None = None
    if isinstance(source, (str, os.PathLike)):
        from ferry.checkpoint.file.api import load  # lazy: keeps `import ferry` light and avoids an import cycle

        path = os.fspath(source)
        if target_device is not None and not is_url(path):
            lazy = _lazy_file(_state_file(path))
        if lazy is not None:
            source = cast(Mapping[str, Any], lazy.obj)
        else:
            extra: dict[str, Any] = {} if storage_options is None else {"storage_options": storage_options}
            source = load(_state_file(path, storage_options), device="cpu", **extra)
            owned = True
    values = _check_source(_module_entry(source, path), path)
    if lazy is not None and not lazy.covers(values):
        from ferry.checkpoint.file.api import load

        values = _check_source(_module_entry(load(lazy.file, device="cpu"), path), path)
        lazy, owned = None, True
    targets = module.state_dict(keep_vars=True)
    pairs = _match(targets, values)
    metadata = _rename_metadata(getattr(values, "_metadata", None), module)

    loadable: dict[str, str] = {}  # module key -> source key
    mismatched: list[ShapeMismatch] = []
    for key, source_key in pairs.items():
        target, value = targets[key], values[source_key]
        both_tensors = isinstance(target, torch.Tensor) and isinstance(value, torch.Tensor)
        if both_tensors and not is_lazy(target) and target.shape != value.shape:
            mismatched.append(ShapeMismatch(key, tuple(target.shape), tuple(value.shape)))
        else:
            loadable[key] = source_key
    if lazy is None:
        _check_no_meta_values(targets, values, loadable, path, into_meta=target_device is not None)

    filled = [key for key in targets if key not in pairs and _filled_by_batchnorm(module, key, metadata)]
    used = set(pairs.values())
    missing = [key for key in targets if key not in pairs and key not in filled]
    unexpected = [key for key in values if key not in used]
    renamed = {source_key: key for key, source_key in pairs.items() if source_key != key}
    notes = _rename_notes(renamed) + tuple(
        f"{key} not in the source: BatchNorm keeps its value (checkpoint without version metadata)" for key in filled
    )
    suggestions = _suggest(missing, unexpected, list(values), list(targets))
    report = LoadReport(missing, unexpected, mismatched, suggestions, list(loadable), renamed, notes)
    if strict and not report.ok:
        raise StateDictMismatchError(
            _mismatch_message(module, report, values, path, "nothing was loaded"), report=report
        )

    sharded = _sharded_on_meta(targets)
    if sharded and target_device is None:
        raise ArgumentError(
            f"{type(module).__name__} is sharded (FSDP2) while still on meta: its shards have no memory to load "
            "into. Pass the device: ferry.load_state_dict(model, path, device=device), which gives each rank "
            "its shards and reads them from the file."
        )
    if target_device is not None and sharded:
        fill(
            module,
            target_device,
            init=None,
            given={},
            redraw=False,
            call="load_state_dict(..., device=...)",
            loaded=frozenset(loadable),
        )
        _load_shards(module.state_dict(keep_vars=True), values, loadable, lazy, target_device)
        return report
    if target_device is not None:
        if lazy is not None:
            given = lazy.read(targets, values, loadable, target_device)
        else:
            given = _place_values(targets, values, loadable, target_device)
        fill(module, target_device, init=None, given=given, redraw=False, call="load_state_dict(..., device=...)")
        return report
    taken = _load(module, targets, values, loadable, filled, metadata, owned=owned)
    # The module's own load hooks have the last word: keys they did not take are reported too.
    dropped = [key for key in loadable if key in taken.missing_keys or key in taken.unexpected_keys]
    if dropped:
        report = LoadReport(
            missing + [key for key in dropped if key in taken.missing_keys],
            unexpected + [loadable[key] for key in dropped if key in taken.unexpected_keys],
            mismatched,
            suggestions,
            [key for key in loadable if key not in dropped],
            renamed,
            (*notes, f"the module's own load hooks did not take {', '.join(dropped)}"),
        )
        if strict:
            message = _mismatch_message(
                module, report, values, path, "the module's load hooks ran, the other keys loaded"
            )
            raise StateDictMismatchError(message, report=report)
    return report


class _LazyFile:
    """A ferry or safetensors file seen through its header: its object with ``meta`` tensors, read on demand."""

    def __init__(self, file: str, header: Any, obj: object, metas: Mapping[str, torch.Tensor]) -> None:
        self.file = file
        self.header = header
        self.obj = obj
        index = {entry.name: number for number, entry in enumerate(header.entries)}
        #: storage of each placeholder -> (entry index, the placeholder)
        self.entries = {_storage(tensor): (index[name], tensor) for name, tensor in metas.items()}

    def entry_of(self, value: torch.Tensor) -> int | None:
        """The entry ``value`` is, whole (not a view into part of it), or None."""
        found = self.entries.get(_storage(value)) if value.is_meta else None
        if found is None:
            return None
        number, whole = found
        exact = value.shape == whole.shape and value.stride() == whole.stride() and value.storage_offset() == 0
        return number if exact and value.dtype == whole.dtype else None

    def covers(self, values: Mapping[str, Any]) -> bool:
        """Every tensor of ``values`` is one whole entry of the file (false for views saved into a tensor)."""
        return all(self.entry_of(value) is not None for value in values.values() if isinstance(value, torch.Tensor))

    def read(
        self,
        targets: Mapping[str, Any],
        values: Mapping[str, Any],
        loadable: Mapping[str, str],
        device: torch.device,
    ) -> dict[int, torch.Tensor]:
        """Read every loadable value into its module tensor's new memory on ``device``: ``id(target) -> tensor``.

        A real target already on ``device`` with the right dtype is read into in place (and not returned).
        """
        from ferry.checkpoint.file.api import open_file
        from ferry.checkpoint.file.reader import read_into

        given: dict[int, torch.Tensor] = {}
        pairs: list[tuple[int, torch.Tensor]] = []
        for key, source_key in loadable.items():
            target, value = targets[key], values[source_key]
            if not isinstance(target, torch.Tensor) or id(target) in given:
                continue  # a tied tensor is read once
            number = self.entry_of(value)
            assert number is not None  # covers() held
            if target.is_meta or target.device != device:
                destination = torch.empty(target.shape, dtype=target.dtype, device=device)
                given[id(target)] = destination
            else:
                destination = target.detach()
                given[id(target)] = target
            pairs.append((number, destination))
        with open_file(Path(self.file)) as (handle, _size), torch.no_grad():
            read_into(handle, self.header, pairs)
        return given

    def read_one(self, value: torch.Tensor, destination: torch.Tensor) -> None:
        """Read the entry ``value`` stands for into ``destination`` (its shape, any dtype and device)."""
        from ferry.checkpoint.file.api import open_file
        from ferry.checkpoint.file.reader import read_into

        number = self.entry_of(value)
        assert number is not None  # covers() held
        with open_file(Path(self.file)) as (handle, _size), torch.no_grad():
            read_into(handle, self.header, [(number, destination)])


def _sharded_on_meta(targets: Mapping[str, Any]) -> bool:
    """Whether some of ``targets`` are DTensor shards (FSDP2) still on meta."""
    dtensor = getattr(sys.modules.get("torch.distributed.tensor"), "DTensor", None)
    return dtensor is not None and any(isinstance(t, dtensor) and t.is_meta for t in targets.values())


def _load_shards(
    targets: Mapping[str, Any],
    values: Mapping[str, Any],
    loadable: Mapping[str, str],
    lazy: _LazyFile | None,
    device: torch.device,
) -> None:
    """Copy each loadable value into its target: this rank's piece into a DTensor shard, the whole into the rest.

    A value from a file is read whole (one tensor at a time, checksums verified) and freed before the next.
    """
    from torch.distributed.tensor import DTensor, distribute_tensor

    done: set[int] = set()
    for key, source_key in loadable.items():
        target, value = targets[key], values[source_key]
        if not isinstance(target, torch.Tensor) or id(target) in done:
            continue
        done.add(id(target))
        if lazy is not None:
            whole = torch.empty(value.shape, dtype=value.dtype, device=device)
            lazy.read_one(value, whole)
        else:
            whole = value.detach().to(device)
        whole = whole.to(target.dtype)
        with torch.no_grad():
            if isinstance(target, DTensor):
                piece = distribute_tensor(whole, target.device_mesh, target.placements, src_data_rank=None)
                target.to_local().copy_(piece.to_local())
            else:
                target.copy_(whole)
        del whole


def _place_values(
    targets: Mapping[str, Any], values: Mapping[str, Any], loadable: Mapping[str, str], device: torch.device
) -> dict[int, torch.Tensor]:
    """Each loadable value as its module tensor's new memory on ``device``: ``id(target) -> tensor``.

    Once per tensor (ties stay ties); a real target already on ``device`` is copied into in place.
    """
    given: dict[int, torch.Tensor] = {}
    with torch.no_grad():
        for key, source_key in loadable.items():
            target, value = targets[key], values[source_key]
            if not isinstance(target, torch.Tensor) or not isinstance(value, torch.Tensor) or id(target) in given:
                continue
            if target.is_meta or target.device != device:
                given[id(target)] = value.detach().to(device=device, dtype=target.dtype, copy=True)
            else:
                target.copy_(value)
                given[id(target)] = target
    return given


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata  # type: ignore[no-any-return]


def _lazy_file(file: str) -> _LazyFile | None:
    """``file`` seen through its header if it is a ferry or safetensors file; None for ``torch.save`` files."""
    from ferry.checkpoint.file import layout, reader, tree
    from ferry.checkpoint.file.api import open_file
    from ferry.checkpoint.file.kinds import SNIFF_BYTES

    try:
        with open_file(Path(file)) as (handle, size):
            head = handle.read(SNIFF_BYTES)
            if not layout.looks_like_safetensors(head):
                return None
            header = reader.read_header(handle, Path(file), size)
    except CheckpointError:
        return None  # let ferry.load raise its own, complete error
    metas = {
        entry.name: torch.empty(entry.shape, dtype=layout.DTYPES[entry.dtype], device="meta")
        for entry in header.entries
    }
    obj: object = metas
    if header.is_ferry:
        numels = {name: tensor.numel() for name, tensor in metas.items()}
        obj = tree.decode(header.metadata[layout.TREE_KEY], numels, metas, Path(file))
    return _LazyFile(file, header, obj, metas)


def _state_file(path: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """The file to read for ``path``: itself, or the state file of a Checkpointer step folder (a URL's too).

    Raises:
        CheckpointError: a sharded step folder (its modules are in rank files: convert it first).
    """
    if is_url(path):
        folder = RemotePath(path, storage_options)
        if folder.is_file() or not folder.is_dir():
            return path
        if has_shards(folder):
            raise CheckpointError(
                f"{path!r} is a sharded checkpoint folder (saved under torch.distributed): its modules are spread "
                "over rank files. Restore it with ferry.Checkpointer(url, storage_options=...).restore(state).",
                path=path,
            )
        return f"{path.rstrip('/')}/{STATE_FILE}"
    if not os.path.isdir(path):
        return path
    if has_shards(path):
        raise CheckpointError(
            f"{path!r} is a sharded checkpoint folder (saved under torch.distributed): its modules are spread over "
            f"rank files. Restore it with ferry.Checkpointer(directory).restore(state), or convert it once with "
            f"`ferry ckpt convert {path} model.safetensors` and load that.",
            path=path,
        )
    state = os.path.join(path, STATE_FILE)
    if not os.path.exists(state):
        raise CheckpointError(
            f"{path!r} is a folder but not a Checkpointer step folder (it holds no {STATE_FILE}). Pass the path of "
            f"a checkpoint file, or of a step folder (run/step-000000100); to restore a whole run, use "
            f"ferry.Checkpointer(run).restore(state).",
            path=path,
        )
    return state


def _state_dicts(objects: Mapping[str, Any]) -> list[str]:
    """The names of the entries of a Checkpointer's ``objects`` that are module state_dicts (str keys, tensors)."""
    return [
        name
        for name, value in objects.items()
        if isinstance(value, Mapping)
        and value
        and all(isinstance(key, str) for key in value)
        and any(isinstance(inner, torch.Tensor) for inner in value.values())
        and not {"state", "param_groups"} <= value.keys()  # an optimizer's
    ]


def _module_entry(source: object, path: str | None) -> object:
    """A Checkpointer checkpoint (``{"step", "objects", "values", ...}``): its one module state_dict, else ``source``.

    Raises:
        CheckpointError: the checkpoint holds several module state_dicts, or none (the message names the entries and
            the call that picks one).
    """
    if not (isinstance(source, Mapping) and {"step", "objects", "values"} <= source.keys()):
        return source
    objects = source["objects"] if isinstance(source["objects"], Mapping) else {}
    names = _state_dicts(objects)
    if len(names) == 1:
        return objects[names[0]]
    where = f" {path!r}" if path else ""
    holder = f"ferry.load({path!r})" if path else "checkpoint"
    if names:
        raise CheckpointError(
            f"checkpoint{where} (step {source['step']!r}) holds the state_dicts of {len(names)} modules: "
            f'{", ".join(map(repr, names))}. Pick one: load_state_dict(model, {holder}["objects"]["{names[0]}"]).',
            path=path,
        )
    raise CheckpointError(
        f"checkpoint{where} (step {source['step']!r}) holds no module state_dict; its objects are "
        f"{', '.join(map(repr, objects)) or 'none'}. Pass a checkpoint that saved the model.",
        path=path,
    )


def _check_source(source: object, path: str | None) -> Mapping[str, Any]:
    """Return ``source`` as a mapping of str keys, or raise CheckpointError saying what to pass instead."""
    where = f" loaded from {path!r}" if path else ""
    if isinstance(source, nn.Module):
        raise CheckpointError(
            f"source{where} is a module ({type(source).__name__}), not a state_dict. "
            "Pass its state: load_state_dict(model, other.state_dict()).",
            path=path,
        )
    if not isinstance(source, Mapping):
        raise CheckpointError(
            f"source{where} is a {type(source).__name__}, not a state_dict (a mapping of key to tensor). "
            "Pass a state_dict or the path of a file holding one.",
            path=path,
        )
    bad_keys = [key for key in source if not isinstance(key, str)]
    if bad_keys:
        raise CheckpointError(
            f"source{where} has keys that are not strings: {', '.join(map(repr, bad_keys[:5]))}. "
            "A state_dict maps dotted names such as 'fc.weight' to tensors; pass the entry that holds one.",
            path=path,
        )
    has_tensors = any(isinstance(value, torch.Tensor) for value in source.values())
    nested = [key for key, value in source.items() if _holds_tensors(value)]
    if nested and not has_tensors:
        found = ", ".join(repr(key) for key in source)
        entry = next((k for k in ("state_dict", "model_state_dict", "model") if k in nested), nested[0])
        holder = "ferry.load(path)" if path else "checkpoint"
        raise CheckpointError(
            f"source{where} is a whole checkpoint, not a state_dict: its top-level keys are {found} and none "
            f"holds a tensor; {', '.join(map(repr, nested))} hold{'s' if len(nested) == 1 else ''} a state_dict. "
            f'Pass that entry: load_state_dict(model, {holder}["{entry}"]).',
            path=path,
        )
    return source


def _holds_tensors(value: object) -> bool:
    return isinstance(value, Mapping) and any(isinstance(inner, torch.Tensor) for inner in value.values())


def _split(key: str) -> tuple[str, tuple[str, ...]]:
    """Return ``key`` without its wrapper segments, and the removed segments in order; the last segment stays."""
    *path, leaf = key.split(".")
    kept: list[str] = []
    removed: list[str] = []
    after_wrapper = True  # the start of a key counts as "after a wrapper" so a leading `module.` goes
    for part in path:
        is_wrapper = part in _WRAPPERS_ANYWHERE or (part == "module" and after_wrapper)
        (removed if is_wrapper else kept).append(part)
        after_wrapper = is_wrapper
    return ".".join([*kept, leaf]), tuple(removed)


def _canonical(key: str) -> str:
    return _split(key)[0]


def _match(targets: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, str]:
    """Pair module keys with source keys: exact names first, then unambiguous canonical names.

    A parameter or buffer only pairs with a tensor; an ``_extra_state`` key pairs with any value.
    """
    pairs: dict[str, str] = {}
    regular = [key for key in targets if not key.endswith(_EXTRA_STATE)]
    extra = [key for key in targets if key.endswith(_EXTRA_STATE)]
    tensor_keys = [key for key, value in values.items() if isinstance(value, torch.Tensor)]
    for module_keys, source_keys in ((regular, tensor_keys), (extra, list(values))):
        taken = set(pairs.values())
        source_set = {key for key in source_keys if key not in taken}
        for key in module_keys:
            if key in source_set:
                pairs[key] = key
                source_set.discard(key)
        left = [key for key in module_keys if key not in pairs]
        by_module = _group(left)
        by_source = _group(key for key in source_keys if key in source_set)
        for canonical, module_group in by_module.items():
            source_group = by_source.get(canonical, [])
            if len(module_group) == 1 and len(source_group) == 1:
                pairs[module_group[0]] = source_group[0]
    return pairs


def _group(keys: Iterable[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for key in keys:
        groups.setdefault(_canonical(key), []).append(key)
    return groups


def _rename_metadata(metadata: object, module: nn.Module) -> dict[str, Any] | None:
    """Rename the source's ``_metadata`` (module prefix -> version info) to the module's own prefixes."""
    if not isinstance(metadata, Mapping):
        return None
    names = [name for name, _ in module.named_modules(remove_duplicate=False)]
    known = set(names)
    by_canonical: dict[str, str] = {}
    for name in sorted(names, key=len):  # the innermost module wins over the wrappers around it
        by_canonical[_canonical(name)] = name
    renamed: dict[str, Any] = {}
    for prefix in sorted((p for p in metadata if isinstance(p, str)), key=len):  # inner modules win, as above
        target = prefix if prefix in known else by_canonical.get(_canonical(prefix))
        if target is not None:
            renamed[target] = metadata[prefix]
    return renamed


def _filled_by_batchnorm(module: nn.Module, key: str, metadata: Mapping[str, Any] | None) -> bool:
    """Whether BatchNorm's own loader fills in ``key`` when absent (``num_batches_tracked``, old checkpoints)."""
    prefix, _, leaf = key.rpartition(".")
    if leaf != "num_batches_tracked":
        return False
    try:
        owner = module.get_submodule(prefix)
    except AttributeError:
        return False
    version = (metadata or {}).get(prefix, {}).get("version")
    return isinstance(owner, _NormBase) and owner.track_running_stats and (version is None or version < 2)


def _check_no_meta_values(
    targets: Mapping[str, Any],
    values: Mapping[str, Any],
    loadable: Mapping[str, str],
    path: str | None,
    *,
    into_meta: bool = False,
) -> None:
    """Refuse values on meta for targets that have storage (or, with ``device=``, for any target)."""
    empty = [
        source_key
        for key, source_key in loadable.items()
        if isinstance(values[source_key], torch.Tensor)
        and values[source_key].is_meta
        and isinstance(targets[key], torch.Tensor)
        and (into_meta or not targets[key].is_meta)
    ]
    if empty:
        shown = ", ".join(empty[:10]) + (f" and {len(empty) - 10} more" if len(empty) > 10 else "")
        raise CheckpointError(
            f"source holds {len(empty)} tensor(s) on the meta device, which have a shape but no values: {shown}. "
            "It was saved from a model that was never materialised. Save the state_dict after loading or "
            "initialising real weights (module.to_empty(device=...) then initialise), and load that.",
            path=path,
        )


class _Taken(NamedTuple):
    missing_keys: set[str]
    unexpected_keys: set[str]


def _load(
    module: nn.Module,
    targets: Mapping[str, Any],
    values: Mapping[str, Any],
    loadable: Mapping[str, str],
    filled: Iterable[str],
    metadata: dict[str, Any] | None,
    *,
    owned: bool,
) -> _Taken:
    """Load through ``module.load_state_dict``: copy into real tensors, assign to meta ones (two passes if mixed)."""
    copy: OrderedDict[str, Any] = OrderedDict()
    assign: OrderedDict[str, Any] = OrderedDict()
    for key, source_key in loadable.items():
        target, value = targets[key], values[source_key]
        if _on_meta(target) and isinstance(value, torch.Tensor):
            assign[key] = value.detach().to(dtype=target.dtype, copy=not owned)
        else:
            copy[key] = value
    if not (copy or assign):
        return _Taken(set(), set())
    # Give BatchNorm its num_batches_tracked explicitly, so that its hook does not copy into a meta buffer.
    for key in filled:
        target = targets[key]
        if _on_meta(target):
            assign[key] = torch.zeros((), dtype=target.dtype)
        else:
            copy[key] = target.detach()
    if copy and assign:
        # Both passes run every module's hooks: hand BatchNorm its meta counter in the copy pass too, or its hook
        # would copy a fresh counter into the meta buffer (a no-op that PyTorch warns about).
        copy.update((key, targets[key].detach()) for key in assign if key.endswith("num_batches_tracked"))
    missing: set[str] | None = None
    unexpected: set[str] = set()
    for state, by_assignment in ((copy, False), (assign, True)):
        if not state:
            continue
        if metadata is not None:
            state._metadata = metadata  # type: ignore[attr-defined]  # as Module.state_dict() attaches it
        result = module.load_state_dict(state, strict=False, assign=by_assignment)
        # With two passes a key is missing only if neither pass took it.
        missing = set(result.missing_keys) if missing is None else missing & set(result.missing_keys)
        unexpected |= set(result.unexpected_keys)
    return _Taken(missing or set(), unexpected)


def _on_meta(target: object) -> bool:
    return isinstance(target, torch.Tensor) and not is_lazy(target) and target.is_meta


def _rename_notes(renamed: Mapping[str, str]) -> tuple[str, ...]:
    changes: Counter[str] = Counter()
    for source_key, key in renamed.items():
        removed, added = _split(source_key)[1], _split(key)[1]
        if removed and added:
            changes[f"replaced '{'.'.join(removed)}.' with '{'.'.join(added)}.' in"] += 1
        elif removed:
            changes[f"stripped '{'.'.join(removed)}.' from"] += 1
        else:
            changes[f"added '{'.'.join(added)}.' to"] += 1
    return tuple(f"{change} {count} key{'' if count == 1 else 's'}" for change, count in changes.items())


def _suggest(
    missing: list[str], unexpected: list[str], source_keys: list[str], module_keys: list[str]
) -> dict[str, str]:
    """Map each missing/unexpected key to the closest key on the other side, unmatched keys preferred."""
    suggestions: dict[str, str] = {}
    for keys, unmatched, everything in ((missing, unexpected, source_keys), (unexpected, missing, module_keys)):
        found = _closest_keys(keys, unmatched)
        found.update(_closest_keys([key for key in keys if key not in found], everything))
        for key, closest in found.items():
            if closest != key:
                suggestions.setdefault(key, closest)
    return suggestions


def _closest_keys(keys: list[str], candidates: list[str]) -> dict[str, str]:
    """Map each of ``keys`` to its closest candidate by difflib ratio (at least 0.6), where there is one.

    Canonical forms are compared, so that wrapper segments neither help nor hurt. Up to ``_FULL_SCAN`` pairs
    every key is compared with every candidate; past that (two different models of thousands of keys, where a
    full scan takes minutes) each key is compared with a shortlist of the candidates sharing most of its
    less common dotted segments.
    """
    by_canonical: dict[str, str] = {}
    for candidate in candidates:
        by_canonical.setdefault(_canonical(candidate), candidate)
    names = list(by_canonical)
    if not keys or not names:
        return {}
    index: dict[str, list[str]] = {}
    if len(keys) * len(names) > _FULL_SCAN:
        for name in names:
            for segment in set(name.split(".")):
                index.setdefault(segment, []).append(name)
    found: dict[str, str] = {}
    for key in keys:
        canonical = _canonical(key)
        shortlist = names
        if index:
            counts: Counter[str] = Counter()
            for segment in set(canonical.split(".")):
                posting = index.get(segment, [])
                if len(posting) <= _COMMON_SEGMENT:
                    counts.update(posting)
            shortlist = [name for name, _ in counts.most_common(_SHORTLIST)]
        match = difflib.get_close_matches(canonical, shortlist, n=1, cutoff=0.6)
        if match:
            found[key] = by_canonical[match[0]]
    return found


def _mismatch_message(
    module: nn.Module, report: LoadReport, values: Mapping[str, Any], path: str | None, outcome: str
) -> str:
    problems = [
        f"{len(report.missing)} missing" if report.missing else "",
        f"{len(report.unexpected)} unexpected" if report.unexpected else "",
        f"{len(report.mismatched)} mis-shaped" if report.mismatched else "",
    ]
    where = f" from {path!r}" if path else ""
    problem = ", ".join(p for p in problems if p)
    lines = [f"state_dict{where} does not fit {type(module).__name__}: {problem} ({outcome})."]
    lines += [f"note: {note}" for note in report.notes]
    if report.missing:
        lines.append(f"missing from the source ({len(report.missing)}):")
        lines += [f"  {report._with_suggestion(key)}" for key in report.missing]
    if report.unexpected:
        lines.append(f"unexpected in the source ({len(report.unexpected)}):")
        for key in report.unexpected:
            value = values.get(key)
            kind = "" if isinstance(value, torch.Tensor) else f"  [holds a {type(value).__name__}, not a tensor]"
            lines.append(f"  {report._with_suggestion(key)}{kind}")
    if report.mismatched:
        lines.append(f"shape mismatch ({len(report.mismatched)}), module expects vs source has:")
        lines += [f"  {m.key}: {_shape(m.expected)} vs {_shape(m.got)}" for m in report.mismatched]
    if not report.loaded:
        lines.append("No key fits: check that this checkpoint was saved from this model and configuration.")
    fixes = [f"Call load_state_dict(model, source, strict=False) to load the {len(report.loaded)} keys that fit"]
    if report.missing or report.unexpected:
        fixes.append("or rename the source keys to the module's names (see the closest matches above)")
    if report.mismatched:
        fixes.append("a shape mismatch usually means a different configuration (e.g. number of classes)")
    lines.append("; ".join(fixes) + ". The error's .report lists every key.")
    return "\n".join(lines)


def _shape(shape: tuple[int, ...]) -> str:
    return f"({', '.join(map(str, shape))}{',' if len(shape) == 1 else ''})"
