"""What vLLM hands the plugin, read the way every release 0.22.1-0.34.0 hands it over, never through a
tensor's truth value (`x or ()` raises for a tensor of more than one element, and a release may pass one
tensor where another passes a list): the kv_cache of a forward context's layers, lists of tables, and the
whole of a block table handed over as a view of its first rows."""


def as_list(value):
    """A list, tuple or other iterable of tensors as a list; one tensor as a list of it; None as an empty list.
    (`value or ()` would test a tensor's truth, which raises for more than one element.)"""
    import torch

    if value is None:
        return []
    return [value] if isinstance(value, torch.Tensor) else list(value)


def layer_kv_cache(layer):
    """(tensors, why): the tensors a forward-context layer's kv_cache holds, as the releases 0.22.1-0.34.0 bind
    it: one tensor (attention and MLA layers, an empty one before binding), a tuple or list of tensors (a Mamba
    layer's states, empty once freed), or none (no kv_cache, None). `why` names what is not a tensor (then the
    tensors are those before it). Never tests a tensor's truth: that raises for more than one element."""
    import torch

    kv_cache = getattr(layer, "kv_cache", None)
    if kv_cache is None:
        return [], None
    if isinstance(kv_cache, torch.Tensor):
        return [kv_cache], None
    if not isinstance(kv_cache, (list, tuple)):
        return [], f"is a {type(kv_cache).__name__}, not a tensor or a list of tensors"
    tensors = []
    for state in kv_cache:
        if not isinstance(state, torch.Tensor):
            return tensors, f"holds a {type(state).__name__}, not a torch.Tensor"
        tensors.append(state)
    return tensors, None


def whole_table(table):
    """The persistent block table that `table`, a view of its first rows, was cut from. The engine hands the
    context's initialiser `block_table.gpu[:num_reqs]` of the first step that needs it (often one request),
    and vLLM keeps only its address and row stride: its kernels then reach every request slot's row in later,
    larger batches. So the rows are all those the tensor's memory holds from the view's first element on (at
    least the persistent table's). Anything but a 2-D table with contiguous columns is returned as it is."""
    import torch

    if (not isinstance(table, torch.Tensor) or table.dim() != 2 or table.size(0) == 0 or table.size(1) == 0
            or table.stride(0) <= 0 or (table.size(1) > 1 and table.stride(1) != 1)):
        return table
    elements = table.untyped_storage().nbytes() // table.element_size() - table.storage_offset()
    rows = (elements - table.size(1)) // table.stride(0) + 1
    return table.as_strided((max(rows, table.size(0)), table.size(1)), table.stride())
