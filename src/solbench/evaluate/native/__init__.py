"""Native solutions (CUDA C++, CUTLASS, cuBLAS, cuDNN, C++ torch extensions), built by the trusted side only.

``build``: compile and link in the build's sandbox (``jail``), check the library's imports against an
allowlist (``symbols``), hash it; ``sources``: the prelude and the binding solbench adds; ``flags``: which
compile options pass; ``carry``: one evaluation's build, before its candidate starts.
"""
