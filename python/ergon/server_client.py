"""ctypes binding of libergon's control-plane client (include/ergon/server_client.h).

Talks to `ergon serve` over its /v1 API with retries and exponential backoff:

    from ergon.server_client import ServerClient
    c = ServerClient("http://127.0.0.1:7787")
    job = c.register_job(pp_degree=4, framework="torch", model_name="gpt3",
                         partition_method="uniform", microbatch_size=1, num_microbatches=8)
    c.register_rank(job, rank=0, dp_rank=0, pp_rank=0, tp_rank=0,
                    pipe_schedule=["load", "forward", "p2p", ...], power_states=[1410, 1395])
    while True:
        got = c.fetch_schedule(job, rank=0)      # None when the job has ended
        if got is None:
            break
        window, states = got
        ...run the window, then:
        c.report(job, window, rank=0, iterations=[(time_s, energy_j, {"forward": [(t, e), ...]},
                                                   {"forward": [wait_s, ...]})])

The library is the rest of the binding's (ergon._lib, which finds it with ergon._libfind:
$ERGON_LIBRARY, the directory it was installed to, else libergon.so.0 on the loader path).
"""
import ctypes
import math

from . import _lib
from ._lib import ErgonError

__all__ = ["ServerClient", "ServerError"]


class ServerError(ErgonError):
    """A client call failed: .status is the erg_status code (11 network, 14 aborted...)."""


# No C struct is mirrored here (tests/lint/no_mirrored_structs.sh): errors are opaque storage
# read with erg_error_message (_lib.error_message), options a heap value set by name
# (erg_srv_client_opts_set), the job description a JSON object
# (erg_srv_client_register_job_json).
def _signatures():
    P, I, D, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_char_p
    E, Z, L, B = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long, ctypes.c_bool
    PP = ctypes.POINTER(P)
    return {
        "erg_srv_client_opts_new": (P, []),
        "erg_srv_client_opts_free": (None, [P]),
        "erg_srv_client_opts_set": (I, [P, S, D, E]),
        "erg_srv_client_new": (I, [S, P, PP, E]),
        "erg_srv_client_free": (None, [P]),
        "erg_srv_client_register_job_json": (I, [P, S, PP, E]),
        "erg_srv_client_register_rank": (I, [P, S, I, I, I, I, ctypes.POINTER(S), Z,
                                             ctypes.POINTER(I), Z, E]),
        "erg_srv_client_fetch_schedule": (I, [P, S, I, ctypes.POINTER(ctypes.POINTER(I)),
                                              ctypes.POINTER(Z), ctypes.POINTER(L),
                                              ctypes.POINTER(B), E]),
        "erg_srv_result_new": (I, [I, PP, E]),
        "erg_srv_result_free": (None, [P]),
        "erg_srv_result_add_iteration": (I, [P, D, D, E]),
        "erg_srv_result_add_sample": (I, [P, S, D, D, E]),
        "erg_srv_result_add_wait": (I, [P, S, D, E]),
        "erg_srv_result_set_energy_source": (I, [P, S, E]),
        "erg_srv_client_report": (I, [P, S, L, P, E]),
        "erg_srv_client_heartbeat": (I, [P, S, I, E]),
        "erg_srv_client_end_job": (I, [P, S, B, S, E]),
        "erg_srv_client_set_straggler": (I, [P, S, D, D, E]),
        "erg_srv_client_request": (I, [P, S, S, S, ctypes.POINTER(I), PP, E]),
    }


#: server_client.h's functions, declared on the binding's one library (ergon._lib).
SIGNATURES = _signatures()


def _load():
    """libergon with server_client.h declared (ergon._lib.use); a library that cannot be
    loaded raises ServerError with the loader's status and message."""
    try:
        return _lib.use(SIGNATURES)
    except ErgonError as e:
        raise ServerError(e.status, e.message) from None


def _b(s):
    return None if s is None else s.encode()


class ServerClient:
    """One connection to `ergon serve` (not thread-safe: one per thread)."""

    def __init__(self, url, request_timeout_s=None, max_retries=None, backoff_initial_s=None,
                 backoff_max_s=None, schedule_wait_s=None, schedule_timeout_s=None):
        self._h = None
        lib = self._lib = _load()
        self._h = ctypes.c_void_p()
        opts = lib.erg_srv_client_opts_new()
        if not opts:
            raise MemoryError("erg_srv_client_opts_new")
        try:
            for k, v in (("request_timeout_s", request_timeout_s), ("max_retries", max_retries),
                         ("backoff_initial_s", backoff_initial_s), ("backoff_max_s", backoff_max_s),
                         ("schedule_wait_s", schedule_wait_s),
                         ("schedule_timeout_s", schedule_timeout_s)):
                if v is None:
                    continue
                if k == "max_retries" and (isinstance(v, bool) or not isinstance(v, int)):
                    raise TypeError("max_retries must be an integer, got %r" % (v,))
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise TypeError("%s must be a number, got %r" % (k, v))
                self._call(lib.erg_srv_client_opts_set, opts, k.encode(), float(v))
            self._call(lib.erg_srv_client_new, url.encode(), opts, ctypes.byref(self._h))
        finally:
            lib.erg_srv_client_opts_free(opts)

    def _call(self, fn, *args):
        err = _lib.new_error()
        st = fn(*args, ctypes.byref(err))
        if st:
            raise ServerError(st, _lib.error_message(err))

    def close(self):
        if getattr(self, "_h", None):
            self._lib.erg_srv_client_free(self._h)
        self._h = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def register_job(self, pp_degree, framework, model_name, partition_method,
                     microbatch_size, num_microbatches, dp_degree=1, tp_degree=1,
                     scheduler=None, scheduler_args=None, mode=None):
        """Register a job (rank 0 only); returns the server's job id."""
        import json
        ints = {"pp_degree": pp_degree, "dp_degree": dp_degree, "tp_degree": tp_degree,
                "microbatch_size": microbatch_size, "num_microbatches": num_microbatches}
        for k, v in ints.items():
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError("%s must be an integer, got %r" % (k, v))
        d = dict(ints, world_size=pp_degree * dp_degree * tp_degree, framework=framework,
                 model_name=model_name, partition_method=partition_method, scheduler=scheduler,
                 scheduler_args_json=(json.dumps(scheduler_args)
                                      if scheduler_args is not None else None),
                 mode=mode)
        out = ctypes.c_void_p()
        self._call(self._lib.erg_srv_client_register_job_json, self._h, json.dumps(d).encode(),
                   ctypes.byref(out))
        s = ctypes.cast(out, ctypes.c_char_p).value.decode()
        self._lib.erg_free(out)
        return s

    def register_rank(self, job_id, rank, dp_rank, pp_rank, tp_rank, pipe_schedule,
                      power_states):
        names = (ctypes.c_char_p * len(pipe_schedule))(*[_b(x) for x in pipe_schedule])
        states = (ctypes.c_int * len(power_states))(*power_states)
        self._call(self._lib.erg_srv_client_register_rank, self._h, _b(job_id), rank, dp_rank,
                   pp_rank, tp_rank, names, len(pipe_schedule), states, len(power_states))

    def fetch_schedule(self, job_id, rank):
        """Wait at the window barrier: (window, [power state per instruction]), or None
        when the job has ended. Raises ServerError (status 14) for an aborted job."""
        ps = ctypes.POINTER(ctypes.c_int)()
        n = ctypes.c_size_t()
        window = ctypes.c_long()
        done = ctypes.c_bool()
        self._call(self._lib.erg_srv_client_fetch_schedule, self._h, _b(job_id), rank,
                   ctypes.byref(ps), ctypes.byref(n), ctypes.byref(window), ctypes.byref(done))
        if done.value:
            return None
        states = [ps[i] for i in range(n.value)]
        self._lib.erg_free(ps)
        return window.value, states

    def report(self, job_id, window, rank, iterations, energy_source=None):
        """iterations: [(time_s, energy_j, {instruction: [(time_s, energy_j or None), ...]},
        {instruction: [wait_s, ...]})]; the per-instruction samples and the receive waits
        (seconds waited in the receive before each occurrence, in run order; the EnvPipe
        scheduler reads them, docs/http-api.md "wait_breakdown") are optional.
        energy_source: where the energies came from ("counter", "integrated", "model",
        "mixed"; Client.energy_source() gives it for the window's steps), kept in the
        server's dumps; None or "" sends none."""
        r = ctypes.c_void_p()
        self._call(self._lib.erg_srv_result_new, rank, ctypes.byref(r))
        try:
            if energy_source:
                self._call(self._lib.erg_srv_result_set_energy_source, r, _b(energy_source))
            for it in iterations:
                t, e = it[0], it[1]
                samples = it[2] if len(it) > 2 else {}
                self._call(self._lib.erg_srv_result_add_iteration, r, float(t), float(e))
                for name, lst in samples.items():
                    for s in lst:
                        se = s[1] if len(s) > 1 and s[1] is not None else math.nan
                        self._call(self._lib.erg_srv_result_add_sample, r, _b(name), float(s[0]),
                                   float(se))
                waits = it[3] if len(it) > 3 and it[3] else {}
                for name, lst in waits.items():
                    for w in lst:
                        self._call(self._lib.erg_srv_result_add_wait, r, _b(name), float(w))
            self._call(self._lib.erg_srv_client_report, self._h, _b(job_id), window, r)
        finally:
            self._lib.erg_srv_result_free(r)

    def request(self, method, path, body=None):
        """Any request with the client's retry policy (transport errors and 502/503/504
        are retried with backoff): returns (HTTP status, response text)."""
        status = ctypes.c_int()
        out = ctypes.c_void_p()
        self._call(self._lib.erg_srv_client_request, self._h, _b(method), _b(path), _b(body),
                   ctypes.byref(status), ctypes.byref(out))
        text = ""
        if out.value:
            text = ctypes.cast(out, ctypes.c_char_p).value.decode(errors="replace")
            self._lib.erg_free(out)
        return status.value, text

    def heartbeat(self, job_id, rank):
        self._call(self._lib.erg_srv_client_heartbeat, self._h, _b(job_id), rank)

    def end_job(self, job_id, reason=None):
        self._call(self._lib.erg_srv_client_end_job, self._h, _b(job_id), False, _b(reason))

    def abort_job(self, job_id, reason=None):
        self._call(self._lib.erg_srv_client_end_job, self._h, _b(job_id), True, _b(reason))

    def set_straggler(self, job_id, slowdown=None, deadline_s=None):
        """Frontier jobs: a straggler slowdown (>= 1) or an iteration deadline (s)."""
        if (slowdown is None) == (deadline_s is None):
            raise ValueError("give exactly one of slowdown or deadline_s")
        self._call(self._lib.erg_srv_client_set_straggler, self._h, _b(job_id),
                   float(slowdown or 0), float(deadline_s or 0))
