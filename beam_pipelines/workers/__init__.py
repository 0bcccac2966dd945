"""Worker-side parallelism: decoding on a thread per core and encoding in forked processes."""
