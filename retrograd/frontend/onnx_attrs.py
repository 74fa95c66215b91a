"""The values ONNX allows for its flag and enumeration attributes, checked before a node is converted.

ONNX's schemas give an attribute's type, not its allowed values: a `keepdims` of 7 or a `reduction` of
"bogus" passes the checker, and runtimes then differ (onnxruntime keeps dims only for 1; a converter
reading `attrs.get(...) == "sum"` would silently take the other branch). Such a model is refused here,
naming the attribute and the values the ONNX operator documentation allows."""

from __future__ import annotations

FLAGS = frozenset({
    "align_corners", "allowzero", "antialias", "batch_axis", "ceil_mode", "center_point_box", "count_include_pad",
    "detect_negative", "detect_positive", "exclude_outside", "exclusive", "fmod", "input_forget", "interleaved",
    "inverse", "is_causal", "keepdims", "largest", "layout", "linear_before_reset", "new_axis",
    "noop_with_empty_axes", "onesided", "reverse", "select_last_index", "sorted", "storage_order", "time_axis",
    "training_mode", "transA", "transB", "upper",
})

_SCATTER = ("none", "add", "mul", "max", "min")
_LOSS = ("none", "sum", "mean")
_RNN = ("forward", "reverse", "bidirectional")
_CTM = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize")

# attribute -> allowed values, or {op_type: allowed values} where operators differ
CHOICES: dict[str, tuple | dict] = {
    "auto_pad": ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"),
    "approximate": ("none", "tanh"),
    "coordinate_transformation_mode": {"Resize": _CTM, "RoiAlign": ("half_pixel", "output_half_pixel")},
    "direction": {"RNN": _RNN, "GRU": _RNN, "LSTM": _RNN, "BitShift": ("LEFT", "RIGHT")},
    "keep_aspect_ratio_policy": ("stretch", "not_larger", "not_smaller"),
    "nearest_mode": ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"),
    "padding_mode": ("zeros", "border", "reflection"),
    "mode": {
        "Resize": ("nearest", "linear", "cubic"), "Upsample": ("nearest", "linear", "bilinear"),
        "Pad": ("constant", "reflect", "edge", "wrap"), "DepthToSpace": ("DCR", "CRD"),
        "GridSample": ("bilinear", "nearest", "bicubic", "linear", "cubic"), "RoiAlign": ("avg", "max"),
    },
    "reduction": {
        "ScatterElements": _SCATTER, "ScatterND": _SCATTER,
        "NegativeLogLikelihoodLoss": _LOSS, "SoftmaxCrossEntropyLoss": _LOSS,
    },
}


def invalid_attribute(op_type: str, attrs: dict) -> str | None:
    """What is wrong with the node's flag and enumeration attributes, or None."""
    for name, value in attrs.items():
        if name in FLAGS and value not in (0, 1):
            return f"attribute '{name}' is {value!r}; ONNX allows 0 or 1"
        allowed = CHOICES.get(name)
        if isinstance(allowed, dict):
            allowed = allowed.get(op_type)
        if allowed is not None and value not in allowed:
            return f"attribute '{name}' is {value!r}; ONNX {op_type} allows {', '.join(map(repr, allowed))}"
    return None
