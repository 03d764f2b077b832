"""The candidate's process: it runs the solution and nothing that judges it; its side of the timing and the audit."""
