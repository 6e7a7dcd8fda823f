#!/usr/bin/env python3
"""Partition equivalence of every Graph op: cases, layout checks, comparison.

usage: gen_cases.py gen OUT.mlir EXPECT.json [--with-known-bugs]
       gen_cases.py check EXPECT.json PROPAGATED.mlir PARTITIONED.mlir
                          --ops GraphOps.td
       gen_cases.py compare REF.safetensors OUT.safetensors [--tol T]

gen writes one module with one function (one compile per tp) holding one
case per op and sharding factor. Operands are graph.weight ops with
pseudo-random values (fixed seed) whose `dist.sharding` seeds the split, and
graph.constant int64 (or int32) index tensors; each case returns its
results as CASE (or CASE.0, CASE.1, ...). Every float weight states its
layout, whole ones too, so the strategy decides nothing and each case splits
exactly the factor it names. A few cases split what their op's rule does
not allow, to pin the fallback (gather, then the op whole). Extents divide
by 4 (by 4 x groups where a split has groups), so the module runs at tp 1,
2 and 4. EXPECT.json records, per case and tp, the layouts of the op under
test (the op at `loc("CASE")`) and the collectives its results need. Cases
that show a known bug are left out unless --with-known-bugs is given.

check reads the IR after pcc-propagate-sharding (printed with
--mlir-print-debuginfo --mlir-print-local-scope) for the layouts, and the IR
after pcc-partition for the collectives each case's returned values depend
on (their use-def cone, so the final gather or reduce at the return counts).
It prints one line per case and exits 1 on any difference.

compare checks every result of OUT against REF: same names, shapes and
dtypes; floats within T (default 1e-5) x max|REF|, integers and booleans
exactly. It also rejects references that could not tell a wrong partition
from a right one (an all-zero float result, a constant boolean one).

Ops covered only through the end-to-end training tests: none. scatter_add,
scatter_elements_add and insert_slice are autodiff's adjoints; here they
are written directly, and their result-only factors (the table's looked-up
axis) are split the way training splits them: propagation's backward
adoption, when a user reads the result split.
"""
import json
import re
import struct
import sys

import numpy as np

# ---------------------------------------------------------------------------
# IR building
# ---------------------------------------------------------------------------


class Value:
    def __init__(self, name, shape, elem):
        self.name, self.shape, self.elem = name, tuple(shape), elem

    @property
    def type(self):
        return tensor_type(self.shape, self.elem)


def tensor_type(shape, elem):
    return "tensor<%s>" % "x".join([str(d) for d in shape] + [elem])


def dense(array, fmt):
    def rec(a):
        if a.ndim == 0:
            return fmt(a.item())
        return "[" + ", ".join(rec(x) for x in a) + "]"
    return "dense<%s>" % rec(np.asarray(array))


def layout_attr(rank, split, groups):
    dims = ", ".join('["tp"]' if d == split else "[]" for d in range(rank))
    text = "#dist.sharding<@mesh, [%s]" % dims
    if groups > 1:
        text += " groups [%s]" % ", ".join(
            str(groups if d == split else 1) for d in range(rank))
    return text + ">"


class Module:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.lines = []
        self.results = []  # (onnx name, Value)
        self.cases = {}  # name -> expectations
        self.case = None
        self.counter = 0
        self.weights = 0
        self.key_ops = set()  # the mnemonic of the case's op under test

    def fresh(self):
        self.counter += 1
        return "%%v%d" % self.counter

    # Operands -----------------------------------------------------------

    def weight(self, shape, split=None, groups=1, values="signed"):
        """A float weight seeded whole or split along `split` (in groups)."""
        shape = tuple(shape)
        rng = self.rng
        if values == "signed":
            a = rng.uniform(-2.0, 2.0, shape)
        elif values == "pos":
            a = rng.uniform(0.5, 2.5, shape)
        elif values == "small":
            a = rng.uniform(-0.5, 0.5, shape)
        elif values == "int":
            a = rng.integers(-4, 4, shape).astype(np.float64)
        else:
            lo, hi = values
            a = rng.integers(lo, hi, shape).astype(np.float64)
        self.weights += 1
        name = "%s.w%d" % (self.case, self.weights)
        v = Value(self.fresh(), shape, "f32")
        attr = ""
        if shape:
            attr = " {dist.sharding = %s}" % layout_attr(
                len(shape), split, groups)
        digits = 3 if values in ("signed", "pos", "small") else 1
        self.lines.append('%s = graph.weight "%s"%s %s : %s' % (
            v.name, name, attr, dense(a, lambda x: "%.*f" % (digits, x)),
            v.type))
        return v

    def indices(self, array, elem="i64"):
        a = np.asarray(array, dtype=np.int64)
        v = Value(self.fresh(), a.shape, elem)
        self.lines.append("%s = graph.constant %s : %s" % (
            v.name, dense(a, lambda x: str(int(x))), v.type))
        return v

    # Ops ----------------------------------------------------------------

    def emit(self, text, shapes, elems, key):
        """Emits `%r = TEXT`, at `loc("CASE")` when it is the op under test
        (`key`), and returns its result(s)."""
        base = self.fresh()
        if len(shapes) == 1:
            names = [base]
            lhs = base
        else:
            names = ["%s#%d" % (base, i) for i in range(len(shapes))]
            lhs = "%s:%d" % (base, len(shapes))
        loc = ""
        if key:
            loc = ' loc("%s")' % self.case
            self.key_ops.add(text.split()[0][len("graph."):])
        self.lines.append("%s = %s%s" % (lhs, text, loc))
        vals = [Value(n, s, e) for n, s, e in zip(names, shapes, elems)]
        return vals[0] if len(vals) == 1 else vals

    def unary(self, op, x, key=True):
        return self.emit("graph.%s %s : %s" % (op, x.name, x.type),
                         [x.shape], [x.elem], key)

    def binary(self, op, a, b, elem=None, key=True):
        shape = np.broadcast_shapes(a.shape, b.shape)
        elem = elem or a.elem
        out = tensor_type(shape, elem)
        return self.emit("graph.%s %s, %s : (%s, %s) -> %s" % (
            op, a.name, b.name, a.type, b.type, out), [shape], [elem], key)

    def compare(self, op, a, b, key=True):
        return self.binary(op, a, b, elem="i1", key=key)

    def where(self, c, a, b, key=True):
        shape = np.broadcast_shapes(c.shape, a.shape, b.shape)
        out = tensor_type(shape, a.elem)
        return self.emit("graph.where %s, %s, %s : (%s, %s, %s) -> %s" % (
            c.name, a.name, b.name, c.type, a.type, b.type, out), [shape],
            [a.elem], key)

    def is_nan(self, x, key=True):
        return self.emit("graph.is_nan %s : %s -> %s" % (
            x.name, x.type, tensor_type(x.shape, "i1")), [x.shape], ["i1"],
            key)

    def cast(self, x, elem, key=True):
        return self.emit("graph.cast %s : %s to %s" % (
            x.name, x.type, tensor_type(x.shape, elem)), [x.shape], [elem],
            key)

    def matmul(self, a, b, key=True):
        sa, sb = list(a.shape), list(b.shape)
        va, vb = len(sa) == 1, len(sb) == 1
        if va:
            sa = [1] + sa
        if vb:
            sb = sb + [1]
        batch = np.broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2]))
        shape = list(batch) + [sa[-2], sb[-1]]
        if vb:
            shape.pop(-1)
        if va:
            shape.pop(-2 if not vb else -1)
        out = tensor_type(shape, a.elem)
        return self.emit("graph.matmul %s, %s : (%s, %s) -> %s" % (
            a.name, b.name, a.type, b.type, out), [shape], [a.elem], key)

    def gemm(self, a, b, c=None, transA=False, transB=False, alpha=None,
             beta=None, key=True):
        m = a.shape[1] if transA else a.shape[0]
        n = b.shape[0] if transB else b.shape[1]
        attrs = []
        if alpha is not None:
            attrs.append("alpha = %s : f32" % alpha)
        if beta is not None:
            attrs.append("beta = %s : f32" % beta)
        if transA:
            attrs.append("transA = true")
        if transB:
            attrs.append("transB = true")
        operands = [a, b] + ([c] if c else [])
        text = "graph.gemm %s" % ", ".join(v.name for v in operands)
        if attrs:
            text += " {%s}" % ", ".join(attrs)
        text += " : (%s) -> %s" % (", ".join(v.type for v in operands),
                                  tensor_type((m, n), a.elem))
        return self.emit(text, [(m, n)], [a.elem], key)

    def softmax(self, x, axis, log=False, key=True):
        op = "log_softmax" if log else "softmax"
        return self.emit("graph.%s %s {axis = %d : i64} : %s" % (
            op, x.name, axis, x.type), [x.shape], [x.elem], key)

    def attention(self, q, k, v, bias=None, scale=0.35, causal=False,
                  key=True):
        out = (q.shape[0], q.shape[1], q.shape[2], v.shape[3])
        lse = q.shape[:3]
        operands = [q, k, v] + ([bias] if bias else [])
        attrs = "{%sscale = %s : f32}" % ("causal, " if causal else "", scale)
        text = "graph.attention %s %s : (%s) -> (%s, %s)" % (
            ", ".join(x.name for x in operands), attrs,
            ", ".join(x.type for x in operands), tensor_type(out, q.elem),
            tensor_type(lse, "f32"))
        return self.emit(text, [out, lse], [q.elem, "f32"], key)

    def attention_grad(self, q, k, v, out, lse, dout, bias=None, scale=0.35,
                       causal=False, key=True):
        operands = [q, k, v, out, lse, dout] + ([bias] if bias else [])
        attrs = "{%sscale = %s : f32}" % ("causal, " if causal else "", scale)
        text = "graph.attention_grad %s %s : (%s) -> (%s, %s, %s)" % (
            ", ".join(x.name for x in operands), attrs,
            ", ".join(x.type for x in operands), q.type, k.type, v.type)
        return self.emit(text, [q.shape, k.shape, v.shape], [q.elem] * 3,
                         key)

    def cache_write(self, cache, rows, slots, positions, tables, key=True):
        operands = [cache, rows, slots, positions, tables]
        text = "graph.cache_write %s : (%s) -> %s" % (
            ", ".join(x.name for x in operands),
            ", ".join(x.type for x in operands), cache.type)
        return self.emit(text, [cache.shape], [cache.elem], key)

    def paged_attention(self, q, kc, vc, slots, positions, tables,
                        scale=0.35, key=True):
        out = (1, q.shape[1], q.shape[2], vc.shape[3])
        operands = [q, kc, vc, slots, positions, tables]
        text = "graph.paged_attention %s {scale = %s : f32} : (%s) -> %s" % (
            ", ".join(x.name for x in operands), scale,
            ", ".join(x.type for x in operands), tensor_type(out, q.elem))
        return self.emit(text, [out], [q.elem], key)

    def layer_norm(self, x, scale, bias, axis, key=True):
        stats = tuple(d if i < axis else 1 for i, d in enumerate(x.shape))
        operands = [x, scale] + ([bias] if bias else [])
        text = ("graph.layer_norm %s {axis = %d : i64} : (%s) -> "
                "(%s, %s, %s)") % (
            ", ".join(v.name for v in operands), axis,
            ", ".join(v.type for v in operands), x.type,
            tensor_type(stats, x.elem), tensor_type(stats, x.elem))
        return self.emit(text, [x.shape, stats, stats], [x.elem] * 3, key)

    def reduce(self, kind, x, axes, keepdims=True, key=True):
        shape = [1 if i in axes else d for i, d in enumerate(x.shape)
                 if keepdims or i not in axes]
        attrs = "axes = array<i64: %s>" % ", ".join(map(str, axes))
        if not keepdims:
            attrs += ", keepdims = false"
        out = tensor_type(shape, x.elem)
        return self.emit("graph.reduce_%s %s {%s} : (%s) -> %s" % (
            kind, x.name, attrs, x.type, out), [shape], [x.elem], key)

    def reshape(self, x, shape, key=True):
        return self.emit("graph.reshape %s : %s to %s" % (
            x.name, x.type, tensor_type(shape, x.elem)), [shape], [x.elem],
            key)

    def expand(self, x, shape, key=True):
        return self.emit("graph.expand %s : %s to %s" % (
            x.name, x.type, tensor_type(shape, x.elem)), [shape], [x.elem],
            key)

    def transpose(self, x, perm, key=True):
        shape = [x.shape[p] for p in perm]
        return self.emit(
            "graph.transpose %s {perm = array<i64: %s>} : (%s) -> %s"
            % (x.name, ", ".join(map(str, perm)), x.type,
               tensor_type(shape, x.elem)), [shape], [x.elem], key)

    def slice(self, x, starts, sizes, steps=None, key=True):
        steps = steps or [1] * len(starts)
        arr = lambda v: "array<i64: %s>" % ", ".join(map(str, v))
        return self.emit(
            "graph.slice %s {starts = %s, sizes = %s, steps = %s} : (%s) -> %s"
            % (x.name, arr(starts), arr(sizes), arr(steps), x.type,
               tensor_type(sizes, x.elem)), [sizes], [x.elem], key)

    def concat(self, xs, axis, key=True):
        shape = list(xs[0].shape)
        shape[axis] = sum(x.shape[axis] for x in xs)
        return self.emit("graph.concat %s {axis = %d : i64} : (%s) -> %s" % (
            ", ".join(x.name for x in xs), axis,
            ", ".join(x.type for x in xs), tensor_type(shape, xs[0].elem)),
            [shape], [xs[0].elem], key)

    def split(self, x, axis, sizes, key=True):
        shapes = []
        for s in sizes:
            shape = list(x.shape)
            shape[axis] = s
            shapes.append(shape)
        return self.emit(
            "graph.split %s {axis = %d : i64, sizes = array<i64: %s>} : "
            "(%s) -> (%s)" % (x.name, axis, ", ".join(map(str, sizes)), x.type,
               ", ".join(tensor_type(s, x.elem) for s in shapes)),
            shapes, [x.elem] * len(sizes), key)

    def gather(self, t, i, axis, key=True):
        shape = t.shape[:axis] + i.shape + t.shape[axis + 1:]
        return self.emit(
            "graph.gather %s[%s] {axis = %d : i64} : (%s, %s) -> %s"
            % (t.name, i.name, axis, t.type, i.type,
               tensor_type(shape, t.elem)), [shape], [t.elem], key)

    def gather_elements(self, d, i, axis, key=True):
        return self.emit(
            "graph.gather_elements %s[%s] {axis = %d : i64} : (%s, %s) -> %s"
            % (d.name, i.name, axis, d.type, i.type,
               tensor_type(i.shape, d.elem)), [i.shape], [d.elem], key)

    def scatter(self, op, u, i, axis, shape, key=True):
        return self.emit("graph.%s %s[%s] {axis = %d : i64} : (%s, %s) -> %s"
                         % (op, u.name, i.name, axis, u.type, i.type,
                            tensor_type(shape, u.elem)), [shape], [u.elem],
                         key)

    def insert_slice(self, s, starts, steps, shape, key=True):
        arr = lambda v: "array<i64: %s>" % ", ".join(map(str, v))
        return self.emit(
            "graph.insert_slice %s {starts = %s, steps = %s} : %s to %s"
            % (s.name, arr(starts), arr(steps), s.type,
               tensor_type(shape, s.elem)), [shape], [s.elem], key)

    def cumsum(self, x, axis, exclusive=False, reverse=False, key=True):
        attrs = ["axis = %d : i64" % axis]
        if exclusive:
            attrs.append("exclusive = true")
        if reverse:
            attrs.append("reverse = true")
        return self.emit("graph.cumsum %s {%s} : %s" % (
            x.name, ", ".join(attrs), x.type), [x.shape], [x.elem], key)

    def top_k(self, x, axis, k, largest=True, key=True):
        shape = list(x.shape)
        shape[axis] = k
        attrs = "axis = %d : i64, k = %d : i64" % (axis, k)
        if not largest:
            attrs += ", largest = false"
        return self.emit("graph.top_k %s {%s} : (%s) -> (%s, %s)" % (
            x.name, attrs, x.type, tensor_type(shape, x.elem),
            tensor_type(shape, "i64")), [shape, shape], [x.elem, "i64"], key)

    def trilu(self, x, upper, k, key=True):
        return self.emit("graph.trilu %s {upper = %s, k = %d : i64} : %s" % (
            x.name, "true" if upper else "false", k, x.type), [x.shape],
            [x.elem], key)

    # Output -------------------------------------------------------------

    def text(self):
        rets = ", ".join('%s {onnx.name = "%s"}' % (v.type, n)
                         for n, v in self.results)
        out = ["// Generated by gen_cases.py: one case per op and sharding "
               "factor.",
               "func.func @main() -> (%s) {" % rets]
        out += ["  " + line for line in self.lines]
        out.append("  return %s : %s" % (
            ", ".join(v.name for _, v in self.results),
            ", ".join(v.type for _, v in self.results)))
        out.append("}")
        return "\n".join(out) + "\n"


CASES = []


def case(name, layouts, comm, bug=None):
    """Registers a case: `layouts` are the op under test's result layouts
    (whole, splitD, splitD/G for G groups, partial:KIND), `comm` the
    collectives its returned values need (all_gather, all_reduce:KIND);
    either may be a dict by tp where they differ. A case with a `bug` (the
    known bug it shows) is left out unless gen is given --with-known-bugs."""
    def by_tp(x, sort):
        out = {}
        for tp in (2, 4):
            v = list(x[tp] if isinstance(x, dict) else x)
            out[str(tp)] = sorted(v) if sort else v
        return out

    def wrap(fn):
        CASES.append((name, by_tp(layouts, False), by_tp(comm, True), bug,
                      fn))
        return fn
    return wrap


GATHER = ["all_gather"]
SUM = ["all_reduce:sum"]

# ---------------------------------------------------------------------------
# The cases. `m.weight(shape, split=d)` seeds a split along d; the others are
# seeded whole. The op under test is emitted with key=True (the default);
# helpers building its operands pass key=False.
# ---------------------------------------------------------------------------

# Element-wise unary ops: a split dimension passes through.
UNARY = {"sqrt": "pos", "reciprocal": "pos", "neg": "signed",
         "abs": "signed", "erf": "signed", "tanh": "signed",
         "sigmoid": "signed", "exp": "signed", "log": "pos",
         "relu": "signed", "floor": "signed", "ceil": "signed",
         "sin": "signed", "cos": "signed"}
for i, (op, vals) in enumerate(sorted(UNARY.items())):
    d = i % 2

    @case("unary_" + op, ["split%d" % d], GATHER)
    def _(m, op=op, vals=vals, d=d):
        return [m.unary(op, m.weight((8, 12), split=d, values=vals))]


def positive(m, x):
    """i1 `x > 0` (not under test)."""
    return m.compare("greater", x, m.weight((), values="small"), key=False)


@case("unary_not", ["split1"], GATHER)
def _(m):
    return [m.unary("not", positive(m, m.weight((4, 8), split=1)))]


@case("is_nan", ["split0"], GATHER)
def _(m):
    # sqrt of negative values: NaN
    r = m.unary("sqrt", m.weight((8, 4), split=0), key=False)
    return [m.is_nan(r)]


# Element-wise binary ops, with broadcasting: the whole operand is cut
# locally where it has the split dimension and stays whole where it has
# extent 1 or lacks it.
@case("add_both_split", ["split1"], GATHER)
def _(m):
    return [m.binary("add", m.weight((4, 8), split=1),
                     m.weight((4, 8), split=1))]


@case("sub_bcast_vector", ["split1"], GATHER)
def _(m):
    return [m.binary("sub", m.weight((4, 8), split=1), m.weight((8,)))]


@case("mul_bcast_column", ["split0"], GATHER)
def _(m):
    return [m.binary("mul", m.weight((8, 4), split=0), m.weight((8, 1)))]


@case("div_other_whole", ["split0"], GATHER)
def _(m):
    return [m.binary("div", m.weight((8, 4), split=0),
                     m.weight((4,), values="pos"))]


@case("pow_both_split", ["split1"], GATHER)
def _(m):
    return [m.binary("pow", m.weight((4, 8), split=1, values="pos"),
                     m.weight((4, 8), split=1))]


@case("max_scalar", ["split1"], GATHER)
def _(m):
    return [m.binary("max", m.weight((4, 8), split=1),
                     m.weight((), values="small"))]


@case("min_second_split", ["split1"], GATHER)
def _(m):
    return [m.binary("min", m.weight((4, 8)), m.weight((4, 8), split=1))]


@case("add_split_vector_bcast", ["split2"], GATHER)
def _(m):
    # the lower-rank operand is the split one
    return [m.binary("add", m.weight((2, 4, 8)), m.weight((8,), split=0))]


for op in ["and", "or", "xor"]:
    @case("logic_" + op, ["split0"], GATHER)
    def _(m, op=op):
        a = positive(m, m.weight((8, 4), split=0))
        b = positive(m, m.weight((8, 4)))
        return [m.binary(op, a, b)]

for i, op in enumerate(["equal", "less", "less_or_equal", "greater",
                        "greater_or_equal"]):
    d = i % 2

    @case("compare_" + op, ["split%d" % d], GATHER)
    def _(m, op=op, d=d):
        # small integers, so that equal and the *_or_equal are exercised
        return [m.compare(op, m.weight((8, 8), split=d, values="int"),
                          m.weight((8,), values="int"))]


@case("where_condition_split", ["split1"], GATHER)
def _(m):
    c = positive(m, m.weight((4, 8), split=1))
    return [m.where(c, m.weight((4, 8)), m.weight((8,)))]


@case("where_value_split", ["split0"], GATHER)
def _(m):
    c = positive(m, m.weight((8, 1)))
    return [m.where(c, m.weight((8, 4), split=0), m.weight(()))]


@case("cast_f32_i64", ["split0"], GATHER)
def _(m):
    # truncation toward zero of signed fractions
    return [m.cast(m.binary("mul", m.weight((8, 4), split=0),
                            m.weight((), values=(3, 4)), key=False), "i64")]


@case("cast_i64_f32", ["split1"], GATHER)
def _(m):
    i = m.cast(m.weight((4, 8), split=1, values="int"), "i64", key=False)
    return [m.cast(i, "f32")]


@case("cast_f32_i1", ["split1"], GATHER)
def _(m):
    return [m.cast(m.weight((4, 8), split=1, values="int"), "i1")]


@case("cast_f32_i32", ["split0"], GATHER)
def _(m):
    return [m.cast(m.weight((8, 4), split=0, values="int"), "i32")]


@case("cast_f32_f64", ["split1"], GATHER)
def _(m):
    return [m.cast(m.weight((4, 8), split=1), "f64")]


@case("expand_split", ["split1"], GATHER)
def _(m):
    return [m.expand(m.weight((1, 8), split=1), (4, 8))]


@case("expand_new_dims", ["split1"], GATHER)
def _(m):
    return [m.expand(m.weight((8, 1), split=0), (2, 8, 4))]


# Operands split along different dimensions: one is gathered.
@case("add_conflict", ["split0"], GATHER * 2)
def _(m):
    return [m.binary("add", m.weight((8, 8), split=0),
                     m.weight((8, 8), split=1))]


# A whole operand made split by the op's user (propagation's backward
# adoption): the exp runs on blocks.
@case("pinned_exp", ["split1"], GATHER)
def _(m):
    e = m.unary("exp", m.weight((4, 8)))
    return [m.binary("add", e, m.weight((4, 8), split=1), key=False)]


@case("pinned_expand_new_dim", ["split0"], GATHER)
def _(m):
    # split along a broadcast dimension, which the operand lacks
    e = m.expand(m.weight((1, 6)), (8, 6))
    return [m.binary("mul", e, m.weight((8, 6), split=0), key=False)]


# Running sums and triangles keep their axes whole; other dimensions split.
@case("cumsum_rows", ["split0"], GATHER)
def _(m):
    return [m.cumsum(m.weight((8, 8), split=0), axis=1)]


@case("cumsum_reverse_exclusive", ["split1"], GATHER)
def _(m):
    return [m.cumsum(m.weight((8, 8), split=1), axis=0, exclusive=True,
                     reverse=True)]


# TopK keeps its axis whole; the rows split (a router's tokens), and the
# indices with them.
@case("top_k_rows", ["split0"] * 2, GATHER * 2)
def _(m):
    values, indices = m.top_k(m.weight((8, 6), split=0), axis=1, k=3)
    return [values, m.cast(indices, "f32", key=False)]


@case("top_k_smallest_columns", ["split1"] * 2, GATHER * 2)
def _(m):
    values, indices = m.top_k(m.weight((5, 8), split=1), axis=0, k=2,
                              largest=False)
    return [values, m.cast(indices, "f32", key=False)]


@case("trilu_batch_upper", ["split0"], GATHER)
def _(m):
    return [m.trilu(m.weight((4, 6, 8), split=0), upper=True, k=1)]


@case("trilu_batch_lower", ["split1"], GATHER)
def _(m):
    return [m.trilu(m.weight((2, 4, 6, 6), split=1), upper=False, k=-1)]


# Normalizations: the normalized dimensions stay whole.
@case("softmax_rows", ["split0"], GATHER)
def _(m):
    return [m.softmax(m.weight((8, 12), split=0), axis=1)]


@case("softmax_middle_split", ["split1"], GATHER)
def _(m):
    return [m.softmax(m.weight((2, 8, 6), split=1), axis=2)]


@case("log_softmax_rows", ["split0"], GATHER)
def _(m):
    return [m.softmax(m.weight((8, 12), split=0), axis=1, log=True)]


# The partition hook of log_softmax: the maximum and the sum of
# exponentials all-reduced over the split axis (vocabulary-parallel).
@case("log_softmax_vocab", ["split1"],
      ["all_reduce:max", "all_reduce:sum", "all_gather"])
def _(m):
    return [m.softmax(m.weight((4, 16), split=1), axis=1, log=True)]


@case("log_softmax_vocab_3d", ["split2"],
      ["all_reduce:max", "all_reduce:sum", "all_gather"])
def _(m):
    return [m.softmax(m.weight((2, 4, 16), split=2), axis=2, log=True)]


@case("layer_norm_batch", ["split0"] * 3, GATHER * 3)
def _(m):
    return list(m.layer_norm(m.weight((8, 3, 16), split=0), m.weight((16,)),
                             m.weight((16,)), axis=2))


@case("layer_norm_two_axes_no_bias", ["split1"] * 3, GATHER * 3)
def _(m):
    return list(m.layer_norm(m.weight((2, 8, 3, 4), split=1),
                             m.weight((3, 4)), None, axis=2))


# Attention splits its batch and its heads (grouped-query heads as [key/value
# heads, query heads per key/value head]); a bias broadcast along the split
# dimension stays whole.
@case("attention_heads_gqa", ["split1"] * 2, GATHER * 2)
def _(m):
    return list(m.attention(m.weight((2, 8, 4, 8), split=1),
                            m.weight((2, 4, 4, 8), split=1),
                            m.weight((2, 4, 4, 8), split=1), causal=True))


@case("attention_batch_padding", ["split0"] * 2, GATHER * 2)
def _(m):
    return list(m.attention(m.weight((4, 4, 4, 8), split=0),
                            m.weight((4, 4, 4, 8), split=0),
                            m.weight((4, 4, 4, 8), split=0),
                            bias=m.weight((4, 1, 1, 4), split=0,
                                          values="small")))


@case("attention_grad_heads_gqa", ["split1"] * 3, GATHER * 3)
def _(m):
    q = m.weight((2, 8, 4, 8), split=1)
    k = m.weight((2, 4, 4, 8), split=1)
    v = m.weight((2, 4, 4, 8), split=1)
    out, lse = m.attention(q, k, v, causal=True, key=False)
    return list(m.attention_grad(q, k, v, out, lse,
                                 m.weight((2, 8, 4, 8), split=1),
                                 causal=True))


@case("attention_grad_batch_bias", ["split0"] * 3, GATHER * 3)
def _(m):
    q = m.weight((4, 4, 4, 8), split=0)
    k = m.weight((4, 4, 4, 8), split=0)
    v = m.weight((4, 4, 4, 8), split=0)
    bias = m.weight((1, 4, 4, 4), values="small")
    out, lse = m.attention(q, k, v, bias=bias, key=False)
    return list(m.attention_grad(q, k, v, out, lse,
                                 m.weight((4, 4, 4, 8), split=0), bias=bias))


# A paged KV cache splits with its key/value heads: the rows written and
# the attention's query heads (grouped) follow. Three tokens of two
# sequences (one a padding token), blocks of 2 positions.
def paged_indices(m):
    return (m.indices([0, 1, -1]), m.indices([2, 0, 0]),
            m.indices([[3, 1], [0, 2]]))


@case("cache_write_heads", ["split1"], GATHER)
def _(m):
    cache = m.unary("exp", m.weight((4, 4, 2, 8), split=1, values="small"),
                    key=False)
    return [m.cache_write(cache, m.weight((1, 4, 3, 8), split=1),
                          *paged_indices(m))]


@case("paged_attention_heads_gqa", ["split1"], GATHER)
def _(m):
    return [m.paged_attention(m.weight((1, 8, 3, 8), split=1),
                              m.weight((4, 4, 2, 8), split=1),
                              m.weight((4, 4, 2, 8), split=1),
                              *paged_indices(m))]


# Reductions over a split dimension leave partial results of their kind;
# over another dimension the split passes through.
for kind in ["sum", "mean", "max", "min"]:
    @case("reduce_%s_split" % kind, ["partial:" + kind],
          ["all_reduce:" + kind])
    def _(m, kind=kind):
        return [m.reduce(kind, m.weight((4, 8), split=1), [1])]

    @case("reduce_%s_split_multi" % kind, ["partial:" + kind],
          ["all_reduce:" + kind])
    def _(m, kind=kind):
        return [m.reduce(kind, m.weight((4, 8, 6), split=1), [1, 2],
                         keepdims=False)]

    @case("reduce_%s_rows" % kind, ["split0"], GATHER)
    def _(m, kind=kind):
        return [m.reduce(kind, m.weight((8, 4, 6), split=0), [1, 2],
                         keepdims=False)]


for kind in ["sum", "max", "min"]:
    @case("reduce_%s_split_i64" % kind, ["partial:" + kind],
          ["all_reduce:" + kind])
    def _(m, kind=kind):
        i = m.cast(m.weight((4, 8), split=1, values=(-50, 50)), "i64",
                   key=False)
        return [m.reduce(kind, i, [1])]


# A mean of integers truncates, so the mean of the ranks' means is not the
# mean: the split is refused and the operand gathered.
@case("reduce_mean_split_i64", ["whole"], ["all_gather"])
def _(m):
    i = m.cast(m.weight((4, 8), split=1, values=(-50, 50)), "i64", key=False)
    return [m.reduce("mean", i, [1])]


@case("reduce_max_split_i32", ["partial:max"], ["all_reduce:max"])
def _(m):
    i = m.cast(m.weight((4, 8), split=1, values=(-50, 50)), "i32", key=False)
    return [m.reduce("max", i, [0, 1])]


@case("reduce_sum_split_f64", ["partial:sum"], SUM)
def _(m):
    d = m.cast(m.weight((4, 8), split=0), "f64", key=False)
    return [m.reduce("sum", d, [0], keepdims=False)]


# Contractions: m, n and batch dimensions are parallel, k leaves partial sums.
@case("matmul_m", ["split0"], GATHER)
def _(m):
    return [m.matmul(m.weight((8, 4), split=0), m.weight((4, 8)))]


@case("matmul_n", ["split1"], GATHER)
def _(m):
    return [m.matmul(m.weight((8, 4)), m.weight((4, 8), split=1))]


@case("matmul_k", ["partial:sum"], SUM)
def _(m):
    return [m.matmul(m.weight((4, 8), split=1), m.weight((8, 6)))]


@case("matmul_k_rhs", ["partial:sum"], SUM)
def _(m):
    return [m.matmul(m.weight((4, 8)), m.weight((8, 6), split=0))]


@case("matmul_k_both", ["partial:sum"], SUM)
def _(m):
    return [m.matmul(m.weight((4, 8), split=1), m.weight((8, 6), split=0))]


# m split on one operand, n on the other: the cheaper one is gathered.
@case("matmul_conflict", ["split1"], GATHER * 2)
def _(m):
    return [m.matmul(m.weight((8, 4), split=0), m.weight((4, 16), split=1))]


@case("matmul_batch", ["split0"], GATHER)
def _(m):
    return [m.matmul(m.weight((4, 3, 8), split=0), m.weight((4, 8, 5)))]


@case("matmul_batch_2d_rhs", ["split0"], GATHER)
def _(m):
    return [m.matmul(m.weight((4, 3, 8), split=0), m.weight((8, 5)))]


@case("matmul_batch_bcast_lhs", ["split0"], GATHER)
def _(m):
    # lhs batch of extent 1 broadcasts against rhs's split batch
    return [m.matmul(m.weight((1, 3, 8)), m.weight((4, 8, 5), split=0))]


@case("matmul_3d_k", ["partial:sum"], SUM)
def _(m):
    return [m.matmul(m.weight((2, 3, 8)), m.weight((8, 8), split=0))]


@case("matmul_3d_m", ["split1"], GATHER)
def _(m):
    return [m.matmul(m.weight((2, 8, 4), split=1), m.weight((4, 5)))]


@case("matmul_heads", ["split1"], GATHER)
def _(m):
    return [m.matmul(m.weight((2, 4, 3, 6), split=1),
                     m.weight((2, 4, 6, 3), split=1))]


@case("matmul_vec_k", ["partial:sum"], SUM)
def _(m):
    return [m.matmul(m.weight((8,), split=0), m.weight((8, 4)))]


@case("matmul_matvec_k", ["partial:sum"], SUM)
def _(m):
    return [m.matmul(m.weight((4, 8)), m.weight((8,), split=0))]


@case("matmul_matvec_m", ["split0"], GATHER)
def _(m):
    return [m.matmul(m.weight((8, 4), split=0), m.weight((4,)))]


@case("gemm_m", ["split0"], GATHER)
def _(m):
    return [m.gemm(m.weight((8, 4), split=0), m.weight((4, 6)),
                   m.weight((6,)))]


@case("gemm_n_bias", ["split1"], GATHER)
def _(m):
    return [m.gemm(m.weight((3, 4)), m.weight((4, 8), split=1),
                   m.weight((8,)))]


@case("gemm_n_bias_split", ["split1"], GATHER)
def _(m):
    return [m.gemm(m.weight((3, 4)), m.weight((4, 8)),
                   m.weight((8,), split=0))]


@case("gemm_k", ["partial:sum"], SUM)
def _(m):
    return [m.gemm(m.weight((3, 8), split=1), m.weight((8, 5)))]


# The partition hook of gemm: the bias joins one rank's partial sum only.
@case("gemm_k_bias", ["partial:sum"], SUM)
def _(m):
    return [m.gemm(m.weight((3, 8), split=1), m.weight((8, 5)),
                   m.weight((5,)))]


@case("gemm_k_bias_scaled", ["partial:sum"], SUM)
def _(m):
    return [m.gemm(m.weight((3, 8)), m.weight((8, 5), split=0),
                   m.weight((3, 5)), alpha=0.5, beta=2.0)]


@case("gemm_k_bias_row", ["partial:sum"], SUM)
def _(m):
    return [m.gemm(m.weight((3, 8), split=1), m.weight((8, 5)),
                   m.weight((1, 5)))]


@case("gemm_k_bias_scalar", ["partial:sum"], SUM)
def _(m):
    return [m.gemm(m.weight((3, 8), split=1), m.weight((8, 5)),
                   m.weight(()))]


@case("gemm_transA_k", ["partial:sum"], SUM)
def _(m):
    return [m.gemm(m.weight((8, 3), split=0), m.weight((8, 5)),
                   m.weight((5,)), transA=True)]


@case("gemm_transA_m", ["split0"], GATHER)
def _(m):
    return [m.gemm(m.weight((5, 8), split=1), m.weight((5, 3)),
                   m.weight((3,)), transA=True)]


@case("gemm_transB_n", ["split1"], GATHER)
def _(m):
    return [m.gemm(m.weight((3, 5)), m.weight((8, 5), split=0),
                   m.weight((3, 8)), transB=True)]


@case("gemm_transAB_k", ["partial:sum"], SUM)
def _(m):
    return [m.gemm(m.weight((8, 3)), m.weight((5, 8), split=1),
                   m.weight((5,)), transA=True, transB=True, alpha=1.5)]


# Data movement.
@case("transpose", ["split2"], GATHER)
def _(m):
    return [m.transpose(m.weight((2, 8, 3), split=1), [2, 0, 1])]


@case("reshape_split_heads", ["split1"], GATHER)
def _(m):
    return [m.reshape(m.weight((3, 16), split=1), (3, 4, 4))]


@case("reshape_merge_heads", ["split1"], GATHER)
def _(m):
    return [m.reshape(m.weight((3, 4, 4), split=1), (3, 16))]


# Merging a split minor dimension: every head's block is split, in groups.
@case("reshape_merge_minor", ["split1/4"], GATHER)
def _(m):
    return [m.reshape(m.weight((3, 4, 4), split=2), (3, 16))]


@case("reshape_split_minor", ["split2"], GATHER)
def _(m):
    return [m.reshape(m.weight((3, 16), split=1, groups=4), (3, 4, 4))]


# Fewer heads than tp 4: the split cannot pass the reshape there.
@case("reshape_heads_fewer_than_tp", {2: ["split1"], 4: ["whole"]}, GATHER)
def _(m):
    return [m.reshape(m.weight((3, 8), split=1), (3, 2, 4))]


@case("reshape_unsqueeze", ["split2"], GATHER)
def _(m):
    return [m.reshape(m.weight((3, 8), split=1), (3, 1, 8))]


@case("reshape_squeeze", ["split0"], GATHER)
def _(m):
    return [m.reshape(m.weight((1, 8, 1), split=1), (8,))]


# A dimension split in groups, split into [groups, n]: a plain split of n.
@case("reshape_groups_to_dim", ["split2"], GATHER)
def _(m):
    return [m.reshape(m.weight((3, 24), split=1, groups=3), (3, 3, 8))]


@case("reshape_merge_rows", ["split0"], GATHER)
def _(m):
    return [m.reshape(m.weight((4, 3, 5), split=0), (12, 5))]


@case("slice_other_dim", ["split0"], GATHER)
def _(m):
    return [m.slice(m.weight((8, 8), split=0), [0, 2], [8, 4])]


@case("slice_other_dim_step", ["split1"], GATHER)
def _(m):
    return [m.slice(m.weight((7, 8), split=1), [1, 0], [3, 8], [2, 1])]


@case("slice_other_dim_reverse", ["split0"], GATHER)
def _(m):
    return [m.slice(m.weight((8, 6), split=0), [0, 5], [8, 6], [1, -1])]


# The partition hook of slice: an aligned equal part of a dimension split in
# groups (each rank holds its block of every part) is the local part.
@case("slice_half_groups", ["split1"], GATHER)
def _(m):
    return [m.slice(m.weight((3, 16), split=1, groups=2), [0, 8], [3, 8])]


@case("slice_quarter_groups", ["split1"], GATHER)
def _(m):
    return [m.slice(m.weight((3, 32), split=1, groups=4), [0, 8], [3, 8])]


@case("slice_rotary_half", ["split1"], GATHER)
def _(m):
    # [.., 2, 8] split along the 8, seen as [.., 16]: two groups
    r = m.reshape(m.weight((3, 2, 8), split=2), (3, 16), key=False)
    return [m.slice(r, [0, 0], [3, 8])]


@case("concat_other_dim", ["split0"], GATHER)
def _(m):
    return [m.concat([m.weight((8, 3), split=0), m.weight((8, 5), split=0)],
                     1)]


@case("concat_mixed", ["split1"], GATHER)
def _(m):
    return [m.concat([m.weight((2, 8)), m.weight((3, 8), split=1)], 0)]


# Equal parts along the split dimension: the result is split in groups.
@case("concat_equal_parts", ["split1/3"], GATHER)
def _(m):
    return [m.concat([m.weight((3, 8), split=1) for _ in range(3)], 1)]


# Parts of extent 1 along the axis (a permutation factor only).
@case("concat_unit_parts", ["split0"], GATHER)
def _(m):
    return [m.concat([m.weight((8, 1), split=0) for _ in range(3)], 1)]


@case("split_unit_parts", ["split1"] * 2, GATHER * 2)
def _(m):
    return list(m.split(m.weight((2, 8), split=1), 0, [1, 1]))


@case("split_other_dim", ["split0"] * 2, GATHER * 2)
def _(m):
    return list(m.split(m.weight((8, 12), split=0), 1, [4, 8]))


# The partition hook of split: GPT-2's fused QKV, a weight split in 3 groups
# whose parts each rank holds a block of.
@case("split_fused_groups", ["split1"] * 3, GATHER * 3)
def _(m):
    return list(m.split(m.weight((3, 24), split=1, groups=3), 1, [8, 8, 8]))


@case("split_fused_qkv_heads", ["split1"] * 3, GATHER * 3)
def _(m):
    qkv = m.matmul(m.weight((3, 8)), m.weight((8, 48), split=1, groups=3),
                   key=False)
    q, k, v = m.split(qkv, 1, [16, 16, 16])
    heads = [m.reshape(x, (3, 4, 4), key=False) for x in (q, k, v)]
    return heads


@case("insert_slice_rows", ["split0"], GATHER)
def _(m):
    return [m.insert_slice(m.weight((8, 4), split=0), [0, 4], [1, 1], (8, 12))]


@case("insert_slice_strided", ["split1"], GATHER)
def _(m):
    return [m.insert_slice(m.weight((3, 8, 2), split=1), [1, 0, 0], [2, 1, 3],
                           (6, 8, 5))]


# Lookups. The partition hook of gather: a table split along the looked-up
# axis (vocabulary-parallel) looks up its rows only, masks the rest, and the
# partial sums are all-reduced: no all-gather.
VOCAB_IDS = [[0, 5, -1], [15, -16, 9]]  # every block of 16 rows at tp 4


@case("gather_vocab", ["partial:sum"], SUM)
def _(m):
    return [m.gather(m.weight((16, 8), split=0), m.indices(VOCAB_IDS), 0)]


@case("gather_vocab_i32", ["partial:sum"], SUM)
def _(m):
    return [m.gather(m.weight((16, 4), split=0),
                     m.indices([[3, -4], [8, 13]], "i32"), 0)]


@case("gather_vocab_axis1", ["partial:sum"], SUM)
def _(m):
    return [m.gather(m.weight((3, 16), split=1),
                     m.indices([-3, 2, 7, 12, 0]), 1)]


@case("gather_vocab_scalar", ["partial:sum"], SUM)
def _(m):
    return [m.gather(m.weight((16, 8), split=0), m.indices(-6), 0)]


@case("gather_hidden", ["split2"], GATHER)
def _(m):
    return [m.gather(m.weight((16, 8), split=1), m.indices(VOCAB_IDS), 0)]


@case("gather_axis1_rows", ["split0"], GATHER)
def _(m):
    return [m.gather(m.weight((8, 16), split=0), m.indices([[1, -2], [3, 4]]),
                     1)]


@case("gather_indices_split", ["split1"], GATHER)
def _(m):
    ids = m.cast(m.weight((3, 8), split=1, values=(-16, 16)), "i64",
                 key=False)
    return [m.gather(m.weight((16, 4)), ids, 0)]


# The partition hook of gather_elements: one element picked per row from a
# split axis (a cross-entropy's label), masked elsewhere, partial sums.
PICK_IDS = [[3], [-1], [8], [12], [0], [-9], [7], [15]]


@case("gather_elements_pick", ["partial:sum"], SUM)
def _(m):
    return [m.gather_elements(m.weight((8, 16), split=1),
                              m.indices(PICK_IDS), 1)]


@case("gather_elements_pick_3d", ["partial:sum"], SUM)
def _(m):
    return [m.gather_elements(m.weight((2, 4, 16), split=2),
                              m.indices(np.reshape(PICK_IDS, (2, 4, 1))), 2)]


@case("gather_elements_pick_axis0", ["partial:sum"], SUM)
def _(m):
    return [m.gather_elements(m.weight((16, 8), split=0),
                              m.indices([[3, -1, 8, 12, 0, -9, 7, 15]]), 0)]


@case("gather_elements_pick_i32", ["partial:sum"], SUM)
def _(m):
    return [m.gather_elements(m.weight((8, 16), split=1),
                              m.indices(PICK_IDS[::-1], "i32"), 1)]


@case("gather_elements_rows", ["split0"], GATHER)
def _(m):
    return [m.gather_elements(m.weight((8, 6), split=0),
                              m.indices([[i % 6, -1 - i % 5, 2, 0]
                                         for i in range(8)]), 1)]


# The adjoints. scatter_add's updates split along a table dimension that is
# not looked up; scatter_elements_add's along a shared one.
@case("scatter_add_hidden", ["split1"], GATHER)
def _(m):
    return [m.scatter("scatter_add", m.weight((2, 3, 8), split=2),
                      m.indices([[1, -2, 1], [7, 0, -16]]), 0, (16, 8))]


@case("scatter_elements_add_rows", ["split0"], GATHER)
def _(m):
    return [m.scatter("scatter_elements_add", m.weight((8, 3), split=0),
                      m.indices([[i % 6, -1, 2] for i in range(8)]), 1,
                      (8, 6))]


# Their partition hooks: a result split along the looked-up axis (as the
# vocabulary-parallel embedding's and label pick's adjoints are in
# training), where the user reads it split. Each rank adds only the
# updates of its rows.
@case("scatter_add_vocab", ["split0"], GATHER)
def _(m):
    s = m.scatter("scatter_add", m.weight((2, 3, 4)),
                  m.indices([[1, -2, 1], [7, 0, -16]]), 0, (16, 4))
    return [m.binary("add", s, m.weight((16, 4), split=0), key=False)]


@case("scatter_elements_add_vocab", ["split1"], GATHER)
def _(m):
    s = m.scatter("scatter_elements_add", m.weight((8, 1)),
                  m.indices(PICK_IDS), 1, (8, 16))
    return [m.binary("mul", s, m.weight((8, 16), split=1), key=False)]


# Dimensions split in groups (each rank holds its block of every group):
# what each op does with such a layout.
@case("groups_add_whole", ["split1/2"], GATHER)
def _(m):
    return [m.binary("add", m.weight((4, 16), split=1, groups=2),
                     m.weight((4, 16)))]


@case("groups_add_ungrouped", ["split1/2"], GATHER * 2)
def _(m):
    return [m.binary("add", m.weight((4, 16), split=1, groups=2),
                     m.weight((4, 16), split=1))]


@case("groups_transpose", ["split0/2"], GATHER)
def _(m):
    return [m.transpose(m.weight((3, 16), split=1, groups=2), [1, 0])]


@case("groups_concat", ["split1/6"], GATHER)
def _(m):
    return [m.concat([m.weight((3, 8), split=1, groups=2) for _ in range(3)],
                     1)]


@case("groups_matmul_k", ["partial:sum"], SUM)
def _(m):
    return [m.matmul(m.weight((4, 16), split=1, groups=2), m.weight((16, 4)))]


@case("groups_reduce_max", ["partial:max"], ["all_reduce:max"])
def _(m):
    return [m.reduce("max", m.weight((4, 16), split=1, groups=2), [1])]


@case("groups_log_softmax", ["split1/2"],
      ["all_reduce:max", "all_reduce:sum", "all_gather"])
def _(m):
    return [m.softmax(m.weight((4, 16), split=1, groups=2), 1, log=True)]


# An aligned half of a dimension in 4 groups holds 2 of them.
@case("groups_slice_half_of_quarters", ["split1/2"], GATHER)
def _(m):
    return [m.slice(m.weight((3, 32), split=1, groups=4), [0, 16], [3, 16])]


@case("groups_split_halves_of_quarters", ["split1/2"] * 2, GATHER * 2)
def _(m):
    return list(m.split(m.weight((3, 32), split=1, groups=4), 1, [16, 16]))


# Fixed: the lookup hooks once took a rank's rows of an axis split in
# groups for one contiguous block.
LOOKUP_GROUPS_BUG = None


@case("groups_gather_vocab", ["partial:sum"], SUM, bug=LOOKUP_GROUPS_BUG)
def _(m):
    return [m.gather(m.weight((16, 4), split=0, groups=2),
                     m.indices(VOCAB_IDS), 0)]


@case("groups_gather_elements_pick", ["partial:sum"], SUM,
      bug=LOOKUP_GROUPS_BUG)
def _(m):
    return [m.gather_elements(m.weight((8, 16), split=1, groups=2),
                              m.indices(PICK_IDS), 1)]


@case("groups_scatter_add_vocab", ["split0/2"], GATHER,
      bug=LOOKUP_GROUPS_BUG)
def _(m):
    s = m.scatter("scatter_add", m.weight((2, 3, 4)),
                  m.indices([[1, -2, 1], [7, 0, -16]]), 0, (16, 4))
    return [m.binary("add", s, m.weight((16, 4), split=0, groups=2),
                     key=False)]


@case("groups_scatter_elements_add_vocab", ["split1/2"], GATHER,
      bug=LOOKUP_GROUPS_BUG)
def _(m):
    s = m.scatter("scatter_elements_add", m.weight((8, 1)),
                  m.indices(PICK_IDS), 1, (8, 16))
    return [m.binary("mul", s, m.weight((8, 16), split=1, groups=2),
                     key=False)]


# Looking up along another dimension than the grouped one is plain.
@case("groups_gather_hidden", ["split2/2"], GATHER)
def _(m):
    return [m.gather(m.weight((16, 8), split=1, groups=2),
                     m.indices(VOCAB_IDS), 0)]


# Partial sums pass through what is linear in them and are reduced once.
def partial(m, shape=(4, 8)):
    return m.matmul(m.weight((shape[0], 8), split=1), m.weight((8, shape[1])),
                    key=False)


@case("partial_add", ["partial:sum"], SUM)
def _(m):
    return [m.binary("add", partial(m), partial(m))]


@case("partial_sub", ["partial:sum"], SUM)
def _(m):
    return [m.binary("sub", partial(m), partial(m))]


@case("partial_reshape", ["partial:sum"], SUM)
def _(m):
    return [m.reshape(partial(m), (4, 2, 4))]


# Not the last two dimensions of the product itself: canonicalization
# rewrites that transpose into the product of the transposed operands.
@case("partial_transpose", ["partial:sum"], SUM)
def _(m):
    return [m.transpose(m.reshape(partial(m), (4, 2, 4), key=False),
                        [1, 0, 2])]


@case("partial_slice", ["partial:sum"], SUM)
def _(m):
    return [m.slice(partial(m), [1, 2], [2, 4])]


@case("partial_concat", ["partial:sum"], SUM)
def _(m):
    return [m.concat([partial(m), partial(m, (4, 4))], 1)]


# ... and are reduced first where the op is not linear in them.
@case("partial_then_bias", ["whole"], SUM)
def _(m):
    return [m.binary("add", partial(m), m.weight((8,)))]


@case("partial_then_tanh", ["whole"], SUM)
def _(m):
    return [m.unary("tanh", partial(m))]


@case("partial_max_then_add", ["whole"], ["all_reduce:max"])
def _(m):
    r = m.reduce("max", m.weight((4, 8), split=1), [1], key=False)
    return [m.binary("add", r, r)]


# A split the rule does not allow: the operand is gathered first, and the
# op runs whole.
@case("fallback_cumsum_axis", ["whole"], GATHER)
def _(m):
    return [m.cumsum(m.weight((4, 8), split=1), axis=1)]


@case("fallback_softmax_axis", ["whole"], GATHER)
def _(m):
    return [m.softmax(m.weight((4, 8), split=1), axis=1)]


@case("fallback_slice_ungrouped", ["whole"], GATHER)
def _(m):
    return [m.slice(m.weight((3, 16), split=1), [0, 8], [3, 8])]


@case("fallback_layer_norm_scale", ["whole"] * 3, GATHER)
def _(m):
    # the scale is split along a normalized dimension: gathered first
    return list(m.layer_norm(m.weight((3, 8)), m.weight((8,), split=0),
                             m.weight((8,)), axis=1))


@case("fallback_reshape_mixed", ["whole"], GATHER)
def _(m):
    return [m.reshape(m.weight((8, 6), split=0), (6, 8))]


@case("fallback_concat_unequal", ["whole"], GATHER)
def _(m):
    return [m.concat([m.weight((3, 8), split=1), m.weight((3, 4))], 1)]


@case("fallback_gather_elements_axis", ["whole"], GATHER)
def _(m):
    return [m.gather_elements(m.weight((4, 8), split=1),
                              m.indices([[0, 7], [-1, 3], [4, 4], [2, -8]]),
                              1)]


@case("scatter_add_index", ["partial:sum"], SUM)
def _(m):
    # updates split along an index dimension (a batch split over data
    # parallelism): each rank scatters its rows, and the tables are partial
    # sums
    return [m.scatter("scatter_add", m.weight((4, 3, 3), split=0),
                      m.indices([[1, 2, 3], [0, 1, 2], [3, 3, 3], [-1, 0, 1]]),
                      0, (4, 3))]


# Megatron's patterns, end to end: an MLP (column then row parallel: one
# all-reduce), attention heads from a fused QKV (one all-reduce), the
# vocabulary-parallel cross-entropy (no [rows, vocab] gather).
@case("mlp", ["partial:sum"], SUM)
def _(m):
    h = m.matmul(m.weight((3, 8)), m.weight((8, 16), split=1), key=False)
    h = m.unary("erf", m.binary("add", h, m.weight((16,)), key=False),
                key=False)
    return [m.matmul(h, m.weight((16, 8), split=0))]


@case("attention", ["partial:sum"], SUM)
def _(m):
    x = m.weight((2, 3, 8))
    qkv = m.matmul(x, m.weight((8, 48), split=1, groups=3), key=False)
    q, k, v = m.split(qkv, 2, [16, 16, 16], key=False)
    heads = [m.transpose(m.reshape(t, (2, 3, 4, 4), key=False), [0, 2, 1, 3],
                         key=False) for t in (q, k, v)]
    kt = m.transpose(heads[1], [0, 1, 3, 2], key=False)
    s = m.matmul(heads[0], kt, key=False)
    s = m.trilu(s, upper=False, k=0, key=False)
    p = m.softmax(s, 3, key=False)
    o = m.matmul(p, heads[2], key=False)
    o = m.reshape(m.transpose(o, [0, 2, 1, 3], key=False), (2, 3, 16),
                  key=False)
    return [m.matmul(o, m.weight((16, 8), split=0))]


@case("cross_entropy_vocab", ["partial:sum"],
      ["all_reduce:max", "all_reduce:sum", "all_reduce:sum"])
def _(m):
    logits = m.matmul(m.weight((8, 4)), m.weight((4, 16), split=1), key=False)
    lp = m.softmax(logits, 1, log=True, key=False)
    pick = m.gather_elements(lp, m.indices(PICK_IDS), 1)
    return [m.reduce("mean", pick, [0, 1], keepdims=False, key=False)]


@case("embedding_vocab", ["partial:sum"], SUM)
def _(m):
    e = m.gather(m.weight((16, 8), split=0), m.indices(VOCAB_IDS), 0)
    return [m.binary("add", e, m.weight((3, 8)), key=False)]


def generate(with_bugs):
    m = Module(seed=20240613)
    for name, layouts, comm, bug, fn in CASES:
        assert name not in m.cases, name
        if bug and not with_bugs:
            continue
        m.case = name
        m.weights = 0
        m.key_ops = set()
        outs = fn(m)
        assert len(m.key_ops) == 1, (name, m.key_ops)
        names = [name] if len(outs) == 1 else [
            "%s.%d" % (name, i) for i in range(len(outs))]
        m.results += list(zip(names, outs))
        m.cases[name] = {"op": m.key_ops.pop(), "layouts": layouts,
                         "comm": comm, "results": names}
    return m


# ---------------------------------------------------------------------------
# check
# ---------------------------------------------------------------------------

SHARDING = re.compile(r'#dist\.sharding<@mesh, \[(.*?)\]'
                      r'(?: groups \[[0-9, ]*\])?'
                      r'(, partial = \["tp"\](?: (\w+))?)?>')


def compact(text):
    """A `#dist.sharding` on the tp axis as whole, splitD, splitD/G (G
    groups) or partial:KIND."""
    m = SHARDING.fullmatch(text)
    if not m:
        raise ValueError("unexpected sharding " + text)
    if m.group(2):
        return "partial:" + (m.group(3) or "sum")
    dims = re.findall(r"\[[^\[\]]*\]", m.group(1))
    split = [d for d, axes in enumerate(dims) if "tp" in axes]
    if not split:
        return "whole"
    groups = re.search(r"groups \[([0-9, ]*)\]", text)
    g = int(groups.group(1).split(",")[split[0]]) if groups else 1
    return "split%d" % split[0] + ("/%d" % g if g > 1 else "")


def results_layouts(line, count):
    m = re.search(r"dist\.results = \[((?:#dist\.sharding<[^>]*>(?:, )?)*)\]",
                  line)
    if not m:
        return ["whole"] * count
    return [compact(s) for s in re.findall(r"#dist\.sharding<[^>]*>",
                                            m.group(1))]


# `%a = op ...`, `%a:3 = op ...` or `%x, %y, %z = op ...` (named results).
DEF = re.compile(r"^\s*((?:%[\w$.-]+(?::\d+)?(?:, )?)+) = ([\w.]+)(.*)$")
USE = re.compile(r"%[\w$.-]+")


# Ops that are operands of every case rather than ops under test.
OPERANDS = {"constant", "weight"}
# Ops of code generation, which pcc-fuse makes after partitioning.
CODEGEN = {"fusion", "yield"}


def check(expect_path, propagated, partitioned, ops_td):
    expect = json.load(open(expect_path))
    names, expect = expect["results"], expect["cases"]
    bad = 0
    # Every Graph op (GraphOps.td) is under test in some case.
    td = open(ops_td).read()
    ops = set(re.findall(r'def Graph_\w+\s*:\s*Graph_\w*Op<"(\w+)"', td))
    tested = {e["op"] for e in expect.values()}
    for op in sorted(ops - tested - OPERANDS - CODEGEN):
        print("FAIL graph.%s: no case" % op)
        bad += 1
    print("ops under test: %d of the %d Graph ops (%s: operands of every "
          "case; %s: code generation's)" % (
              len(ops & tested), len(ops), ", ".join(sorted(OPERANDS)),
              ", ".join(sorted(CODEGEN))))
    # Layouts of the op under test.
    key_lines = {}
    tp = re.search(r"dist\.mesh @mesh\(tp = (\d+)\)",
                   open(propagated).read()).group(1)
    for line in open(propagated):
        m = re.search(r'loc\("([^"]+)"\)\s*$', line)
        if m and m.group(1) in expect and DEF.match(line):
            key_lines.setdefault(m.group(1), []).append(line)
    # Use-def graph of the partitioned function.
    defs, ret = {}, None
    for line in open(partitioned):
        line = re.sub(r'loc\(.*\)\s*$', "", line)
        d = DEF.match(line)
        if d:
            for result in USE.findall(d.group(1)):
                defs[result] = (d.group(2), USE.findall(d.group(3)), line)
        elif re.match(r"^\s*return ", line):
            ret = USE.findall(line.split(":")[0])
    for name, e in expect.items():
        lines = key_lines.get(name, [])
        if len(lines) != 1:
            print("FAIL %s: %d ops at loc(\"%s\")" % (name, len(lines), name))
            bad += 1
            continue
        want_layouts, want_comm = e["layouts"][tp], e["comm"][tp]
        got = results_layouts(lines[0], len(want_layouts))
        # Collectives in the cone of the case's returned values.
        seen, comm = set(), []
        stack = [ret[names.index(r)] for r in e["results"]]
        while stack:
            v = stack.pop()
            if v in seen or v not in defs:
                continue
            seen.add(v)
            op, uses, text = defs[v]
            if op == "dist.all_reduce":
                comm.append("all_reduce:" +
                            re.search(r'axes \[[^\]]*\] (\w+)', text).group(1))
            elif op in ("dist.all_gather", "dist.reduce_scatter",
                        "dist.all_to_all"):
                comm.append(op[len("dist."):])
            stack += uses
        comm.sort()
        ok = got == want_layouts and comm == want_comm
        print("%s%s: %s; %s" % ("" if ok else "FAIL ", name, " ".join(got),
                                " ".join(comm) or "no collective"))
        if not ok:
            print("  expected: %s; %s" % (" ".join(want_layouts),
                                          " ".join(want_comm) or
                                          "no collective"))
            bad += 1
    if bad:
        print("FAIL %d of %d cases" % (bad, len(expect)))
        return 1
    print("ok %d cases at tp %s" % (len(expect), tp))
    return 0


# ---------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64,
          "I32": np.int32, "BOOL": np.bool_, "U8": np.uint8}


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + e],
                                  dtype=DTYPES[info["dtype"]]).reshape(
            info["shape"])
    return out


def compare(ref_path, out_path, tol):
    ref, out = read_safetensors(ref_path), read_safetensors(out_path)
    bad = []
    if set(ref) != set(out):
        bad.append("names differ: only in reference %s, only in output %s" % (
            sorted(set(ref) - set(out)), sorted(set(out) - set(ref))))
    for name in sorted(set(ref) & set(out)):
        r, o = ref[name], out[name]
        if r.shape != o.shape or r.dtype != o.dtype:
            bad.append("%s: %s %s vs %s %s" % (name, r.dtype, r.shape,
                                               o.dtype, o.shape))
        elif r.dtype.kind == "f":
            scale = float(np.max(np.abs(r)))
            if not np.all(np.isfinite(r)) or scale == 0:
                bad.append("%s: reference is all zero or not finite" % name)
                continue
            diff = float(np.max(np.abs(r.astype(np.float64) - o)))
            if not diff <= tol * scale:
                bad.append("%s: max|diff| %.3e > %.3e" % (name, diff,
                                                          tol * scale))
        else:
            if r.dtype == np.bool_ and (r.all() or not r.any()):
                bad.append("%s: reference is constant" % name)
            elif not np.array_equal(r, o):
                bad.append("%s: %d of %d elements differ" % (
                    name, int(np.sum(r != o)), r.size))
    for b in bad:
        print("FAIL " + b)
    if bad:
        return 1
    print("ok %d results equal" % len(ref))
    return 0


def main(argv):
    if len(argv) in (4, 5) and argv[1] == "gen":
        if len(argv) == 5 and argv[4] != "--with-known-bugs":
            return main([])
        m = generate(with_bugs=len(argv) == 5)
        open(argv[2], "w").write(m.text())
        json.dump({"results": [n for n, _ in m.results], "cases": m.cases},
                  open(argv[3], "w"), indent=1)
        return 0
    if len(argv) == 7 and argv[1] == "check" and argv[5] == "--ops":
        return check(argv[2], argv[3], argv[4], argv[6])
    if len(argv) in (4, 6) and argv[1] == "compare":
        tol = float(argv[5]) if len(argv) == 6 and argv[4] == "--tol" else 1e-5
        return compare(argv[2], argv[3], tol)
    print(__doc__.strip().splitlines()[2])
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
