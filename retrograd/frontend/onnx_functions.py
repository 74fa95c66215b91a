"""ONNX operators that ONNX itself defines as functions of other operators (HannWindow, RotaryEmbedding,
SwiGLU, CenterCropPad, ...): a node of one without a converter of its own is imported as the nodes of its
function body, ONNX's own definition, for the model's opset."""

from __future__ import annotations


def function_body(onnx, node, opset: int, input_types: list, prefix: str):
    """(nodes, the body's opset) replacing `node`, or None when its schema defines no function for
    `opset`. `input_types` are the node's inputs as onnx TypeProtos (a context-dependent function, such
    as one that depends on the input dtype, is built for them); internal values are named `prefix...`."""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except onnx.defs.SchemaError:
        return None
    node = _with_defaults(onnx, node, schema)
    static = [v for v in schema.function_opset_versions if v <= opset]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    if dependent:  # built for these inputs: the more specific body (AffineGrid's static one branches on rank)
        types = [t.SerializeToString() for t in input_types]
        text = schema.get_context_dependent_function_with_opset_version(max(dependent), node.SerializeToString(), types)
    elif static:
        text = schema.get_function_with_opset_version(max(static))
    else:
        return None
    body = onnx.FunctionProto()
    body.ParseFromString(text)
    names = {name: node.input[i] if i < len(node.input) else "" for i, name in enumerate(body.input)}
    # An output the node omits keeps an internal name: the body may still read it.
    names.update({name: node.output[i] for i, name in enumerate(body.output) if i < len(node.output) and node.output[i]})
    attributes = {a.name: a for a in node.attribute}

    def rename(name: str) -> str:
        return names[name] if name in names else (prefix + name if name else "")

    nodes = [_renamed(onnx, n, rename, attributes, prefix) for n in body.node]
    version = next((imp.version for imp in body.opset_import if imp.domain in ("", "ai.onnx")), opset)
    return nodes, version


def _with_defaults(onnx, node, schema):
    """The node with the schema's default value of every attribute it leaves out (the body may refer to it)."""
    given = {a.name for a in node.attribute}
    defaults = [d.default_value for name, d in schema.attributes.items() if name not in given and d.default_value.name]
    if not defaults:
        return node
    out = onnx.NodeProto()
    out.CopyFrom(node)
    out.attribute.extend(defaults)
    return out


def _renamed(onnx, inner, rename, attributes: dict, prefix: str):
    """`inner` with its value names passed through `rename` and its attribute references resolved; an If's
    branches (sub-graphs) renamed the same way, their own values prefixed."""
    from retrograd.errors import UnsupportedError

    out = onnx.NodeProto()
    out.CopyFrom(inner)
    out.ClearField("input")
    out.ClearField("output")
    out.ClearField("attribute")
    out.input.extend(rename(n) for n in inner.input)
    out.output.extend(rename(n) for n in inner.output)
    for attr in inner.attribute:
        if attr.ref_attr_name:
            if attr.ref_attr_name not in attributes:
                continue  # an optional attribute the node does not set
            new = onnx.AttributeProto()
            new.CopyFrom(attributes[attr.ref_attr_name])
            new.name = attr.name
            out.attribute.append(new)
        elif attr.type == onnx.AttributeProto.GRAPH:
            new = onnx.AttributeProto()
            new.CopyFrom(attr)
            graph = new.g
            own = {v.name: prefix + v.name for v in (*graph.input, *graph.output, *graph.initializer)}
            for v in (*graph.input, *graph.output, *graph.initializer):
                v.name = own[v.name]
            nodes = [_renamed(onnx, n, lambda name, own=own: own.get(name) or rename(name), attributes, prefix)
                     for n in graph.node]
            graph.ClearField("node")
            graph.node.extend(nodes)
            out.attribute.append(new)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            raise UnsupportedError(f"its ONNX function body has control flow ({inner.op_type}), which is not supported")
        else:
            out.attribute.append(attr)
    return out
