"""Threads, child processes, signals and hooks, and the worker's result channel."""

from __future__ import annotations

import ast

from .rules import REJECT, cpp_pattern, names, on_call, rule

rule("threading", REJECT, "Threads, thread pools and worker processes can keep computing after the timer stops.")
rule("subprocess", REJECT, "Child processes and shell commands escape the timed call and the sandbox's accounting.")
rule("signal_tamper", REJECT,
     "Signal handlers, timers, exit hooks, tracers and process kills interfere with the harness's watchdog and timing.")
rule("result_channel", REJECT,
     "Reading the worker's command line or writing raw file descriptors can forge the harness's result channel.")

names("threading", "threading _thread _dummy_thread concurrent multiprocessing torch.multiprocessing asyncio joblib")
names("subprocess", "subprocess os.system os.popen os.fork os.forkpty os.startfile pty pexpect commands",
      pattern=r"^os\.(exec\w*|spawn\w*|posix_spawn\w*|fork\w*|popen\w*)$")
names(
    "signal_tamper",
    "signal.signal signal.alarm signal.setitimer signal.pthread_kill signal.pthread_sigmask signal.siginterrupt "
    "signal.raise_signal signal.set_wakeup_fd atexit sys.settrace sys.setprofile sys.addaudithook sys.monitoring "
    "threading.settrace threading.setprofile threading.settrace_all_threads threading.setprofile_all_threads "
    "faulthandler.register faulthandler.dump_traceback_later faulthandler.cancel_dump_traceback_later "
    "faulthandler.disable os.kill os.killpg os._exit os.abort resource.setrlimit resource.prlimit "
    "sys.call_tracing sys._settraceallthreads sys._setprofileallthreads cProfile profile _lsprof trace bdb pdb "
    "breakpoint numpy.seterrcall",
)
names(
    "result_channel",
    "sys.argv sys.orig_argv os.write os.writev os.pwrite os.pwritev os.fdopen os.dup os.dup2 os.close os.closerange "
    "os.read os.sendfile os.set_inheritable os.set_blocking input",
)

cpp_pattern("threading", r"std\s*::\s*j?thread\b|std\s*::\s*async\b|\bpthread_create\b|boost\s*::\s*thread\b|"
                         r"\bCreateThread\b|#\s*include\s*<\s*thread\s*>",
            "starts a thread", words="thread jthread async pthread_create CreateThread")
cpp_pattern("subprocess", r"(?<![\w.>])(?:v?fork|system|popen|exec(?:l|lp|le|v|vp|vpe|ve)|posix_spawnp?)\s*\(",
            "starts a process or shell",
            words="fork vfork system popen execl execlp execle execv execvp execvpe execve posix_spawn posix_spawnp")
cpp_pattern("signal_tamper",
            r"(?<![\w.>])(?:signal|sigaction|alarm|setitimer|atexit|at_quick_exit|kill|killpg)\s*\(|"
            r"\bPyEval_SetTrace\b|\bPyEval_SetProfile\b|\bPySys_AddAuditHook\b|\bPy_AtExit\b",
            "installs a signal handler, timer, exit hook or tracer",
            words="signal sigaction alarm setitimer atexit at_quick_exit kill killpg PyEval_SetTrace PyEval_SetProfile "
                  "PySys_AddAuditHook Py_AtExit")


@on_call("result_channel", "open", "io.open", "io.FileIO")
def raw_descriptor_open(s, node: ast.Call, r: str) -> None:
    """``open(3)``: a raw descriptor number is one of the worker's pipes."""
    args = node.args
    if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, int):
        s.add("result_channel", node, f"{r}() on raw file descriptor {args[0].value}")
