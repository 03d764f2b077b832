"""The trusted worker: the process that judges every subject on a device, the runner's keeper of it, the subjects it
judges (a trusted baseline, a sandboxed candidate) and the memory judging takes."""
