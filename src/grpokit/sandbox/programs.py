"""The two programs the sandbox runs: the worker (the solution's side) and the judge (the tests' side).

Kept apart from `grpokit.sandbox`, which builds the bubblewrap command lines,
starts these programs, and reads the judge's report; see its docstring for the
trust model. They are source strings because each runs in a fresh interpreter
inside its own sandbox.
"""
# The shared _limits / framing helpers are prepended to both programs.
# Both run as `python -I -S -c SRC`: isolated mode, no site-packages, no
# environment-driven imports. They set their own rlimits first, before any
# untrusted byte is read, and as an unprivileged uid hard limits cannot be raised.
# They import nothing heavier than struct: `json` alone (via `re`) would double
# an interpreter's start-up time. Values cross between them in a small tagged
# binary format that only ever builds builtin objects; marshal is not used on
# what the worker sends because it is not safe against crafted input.

_COMMON_SRC = r'''
import os, sys, resource, select, struct, time, marshal
def _limits(lim):
    for name, val in zip(("CPU", "AS", "FSIZE", "NPROC", "NOFILE", "CORE"), lim):
        resource.setrlimit(getattr(resource, "RLIMIT_" + name), (val, val))
_MAX_MSG = 8 << 20
_SEQ = {list: b"l", tuple: b"t", set: b"S", frozenset: b"z"}
def _enc(x, out, depth=0):
    t = type(x)
    if depth > 100: raise TypeError("value nested too deeply")
    if x is None: out.append(b"N")
    elif t is bool: out.append(b"T" if x else b"F")
    elif t is int:
        s = b"%d" % x; out += [b"i", struct.pack(">I", len(s)), s]
    elif t is float: out += [b"f", struct.pack(">d", x)]
    elif t is complex: out += [b"c", struct.pack(">dd", x.real, x.imag)]
    elif t is str or t is bytes:
        s = x.encode("utf-8", "surrogatepass") if t is str else x
        out += [b"s" if t is str else b"b", struct.pack(">I", len(s)), s]
    elif t in _SEQ:
        out += [_SEQ[t], struct.pack(">I", len(x))]
        for v in x: _enc(v, out, depth + 1)
    elif t is dict:
        out += [b"d", struct.pack(">I", len(x))]
        for k, v in x.items(): _enc(k, out, depth + 1); _enc(v, out, depth + 1)
    else: raise TypeError("a value of type %s cannot be passed between judge and solution" % t.__name__)
    return out
def _dec(buf, pos=0, depth=0):
    # -> (value, next position); ValueError on anything malformed
    if depth > 100 or pos >= len(buf): raise ValueError("malformed value")
    tag = buf[pos:pos + 1]; pos += 1
    if tag == b"N": return None, pos
    if tag == b"T": return True, pos
    if tag == b"F": return False, pos
    if tag == b"f": return struct.unpack_from(">d", buf, pos)[0], pos + 8
    if tag == b"c": return complex(*struct.unpack_from(">dd", buf, pos)), pos + 16
    n = struct.unpack_from(">I", buf, pos)[0]; pos += 4
    if tag in (b"i", b"s", b"b"):
        raw = buf[pos:pos + n]
        if len(raw) != n: raise ValueError("malformed value")
        if tag == b"i":
            if not raw.lstrip(b"-").isdigit(): raise ValueError("malformed value")
            return int(raw), pos + n
        return (raw.decode("utf-8", "surrogatepass") if tag == b"s" else raw), pos + n
    if n > len(buf): raise ValueError("malformed value")
    items = []
    for _ in range(2 * n if tag == b"d" else n):
        v, pos = _dec(buf, pos, depth + 1); items.append(v)
    if tag == b"l": return items, pos
    if tag == b"t": return tuple(items), pos
    if tag == b"S": return set(items), pos
    if tag == b"z": return frozenset(items), pos
    if tag == b"d": return dict(zip(items[::2], items[1::2])), pos
    raise ValueError("malformed value")
def _decode(buf):
    v, pos = _dec(buf)
    if pos != len(buf): raise ValueError("malformed value")
    return v
def _frame(obj):
    data = b"".join(_enc(obj, []))
    return struct.pack(">I", len(data)) + data
'''

WORKER_SRC = _COMMON_SRC + r'''
def _main():
    _limits([int(v) for v in sys.argv[1].split(",")])
    rd, wr = os.dup(0), os.dup(1)
    nul = os.open(os.devnull, os.O_RDWR)
    os.dup2(nul, 0); os.dup2(nul, 1); os.dup2(nul, 2)  # prints cannot reach the channel
    def read(n):
        buf = b""
        while len(buf) < n:
            b = os.read(rd, n - len(buf))
            if not b: raise SystemExit(0)  # the judge is done
            buf += b
        return buf
    def recv(): return _decode(read(struct.unpack(">I", read(4))[0]))
    def send(obj):
        data = _frame(obj)
        while data: data = data[os.write(wr, data):]
    def err(e):
        try: msg = str(e)[:500]
        except BaseException: msg = "?"
        return ("raise", type(e).__name__, msg)
    code = recv()
    ns = {"__name__": "solution", "__builtins__": __builtins__}  # not __main__: demo blocks stay off
    try:
        co = compile(code, "<solution>", "exec")
    except BaseException as e:
        send(("compile",) + err(e)[1:]); return
    try:
        exec(co, ns)
    except BaseException as e:
        send(("import",) + err(e)[1:]); return
    send(("ready", [k for k, v in list(ns.items()) if type(k) is str and callable(v)]))
    while True:
        name, args, kwargs = recv()
        try:
            reply = _frame(("value", ns[name](*args, **kwargs)))
        except BaseException as e:
            reply = _frame(err(e))
        while reply: reply = reply[os.write(wr, reply):]
_main()
'''

JUDGE_SRC = _COMMON_SRC + r'''
import builtins
class WorkerGone(Exception): pass
class WorkerTimeout(Exception): pass
class SolutionError(Exception): pass
def _main():
    spec = marshal.loads(sys.stdin.buffer.read())  # from grpokit itself: trusted
    _limits(spec["limits"])
    deadline = time.monotonic() + spec["timeout_s"]
    out = os.dup(1)
    nul = os.open(os.devnull, os.O_RDWR)
    os.dup2(nul, 0); os.dup2(nul, 1)  # test code that prints cannot corrupt the report
    def emit(**ev):
        data = marshal.dumps(ev)
        os.write(out, struct.pack(">I", len(data)) + data)
    wr, rd = spec["fds"]
    os.set_blocking(wr, False)
    def wait(fd, for_write):
        left = deadline - time.monotonic()
        if left <= 0: raise WorkerTimeout()
        r, w, _ = select.select([] if for_write else [fd], [fd] if for_write else [], [], left)
        if not (r or w): raise WorkerTimeout()
    def send(obj):
        data = _frame(obj)
        while data:
            wait(wr, True)
            try: data = data[os.write(wr, data):]
            except BrokenPipeError: raise WorkerGone("the solution's process exited") from None
    def read(n):
        buf = b""
        while len(buf) < n:
            wait(rd, False)
            b = os.read(rd, min(n - len(buf), 1 << 20))
            if not b: raise WorkerGone("the solution's process exited")
            buf += b
        return buf
    def recv():
        n = struct.unpack(">I", read(4))[0]
        if n > _MAX_MSG: raise WorkerGone("reply too large")
        msg = _decode(read(n))
        if type(msg) is not tuple or not msg: raise ValueError("malformed reply")
        return msg
    class Proxy:
        def __init__(self, name): self.name = name
        def __call__(self, *args, **kwargs):
            send((self.name, args, kwargs))
            r = recv()
            if r[0] == "value" and len(r) == 2: return r[1]
            kind = getattr(builtins, str(r[1]) if len(r) == 3 else "", None)
            if not (isinstance(kind, type) and issubclass(kind, Exception)):
                raise SolutionError("%s: %s" % tuple(map(str, r[1:3])))
            raise kind(str(r[2]))
    try:
        send(spec["code"])
        ready = recv()
    except WorkerTimeout:
        emit(event="import_error", error="timed out while loading the solution", timed_out=True); return
    except (WorkerGone, ValueError, TypeError, struct.error) as e:
        emit(event="import_error", error="the solution did not finish loading: %s" % e); return
    if ready[0] != "ready":
        what = tuple(map(str, ready + ("?", "?", "?")))[:3]
        emit(event="import_error", error="%s error: %s: %s" % what, memory=what[1] == "MemoryError"); return
    emit(event="ready")
    ns = {"__name__": "__test__"}
    exec(compile(spec["prelude"], "<prelude>", "exec"), ns)
    exec(compile(spec["setup"], "<setup>", "exec"), ns)
    names = set(ready[1]) if len(ready) == 2 and type(ready[1]) is list else set()
    proxies = spec["proxies"] or {n: n for n in spec["referenced"] if n in names}
    for mine, theirs in proxies.items(): ns[mine] = Proxy(theirs)
    dead = None
    for i, (kind, src) in enumerate(spec["units"]):
        ok, reason = False, ""
        if dead:
            reason = "not run: " + dead
        else:
            try:
                exec(compile(src, "<test %d>" % i, "exec"), ns); ok = True
            except WorkerTimeout:
                dead = reason = "timed out"
            except WorkerGone as e:
                dead = reason = str(e)
            except AssertionError:
                reason = "assertion failed"
            except Exception as e:
                reason = "%s: %s" % (type(e).__name__, str(e)[:300])
        if kind == "test": emit(event="test", i=i, ok=ok, reason=reason)
    emit(event="done")
_main()
'''
