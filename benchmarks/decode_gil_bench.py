"""Does tf.io.decode_image release the GIL? The main thread counts pure-Python loop iterations per
second while a second thread runs (a) nothing, (b) TensorFlow decodes, (c) sorted() of a big list, a C
call known to hold the GIL. If decoding held the GIL, (b) would starve the counter like (c) does."""
import os, sys, threading, time, random
os.environ["TF_CPP_MIN_LOG_LEVEL"]="2"
sys.path.insert(0, "/work/wt/i13")
import tensorflow as tf
from PIL import Image
from tfrecorder.sample_data import encode_image, photo_array
imgs=[encode_image(Image.fromarray(photo_array(375,500,i)),"JPEG",quality=87) for i in range(20)]
big=[random.random() for _ in range(60000)]
t=time.perf_counter(); sorted(big); print(f"one sorted() call {1000*(time.perf_counter()-t):.2f} ms; one decode ", end="")
t=time.perf_counter(); tf.io.decode_image(imgs[0], expand_animations=False); print(f"{1000*(time.perf_counter()-t):.2f} ms")
def work(kind, stop):
    i = 0
    while not stop.is_set():
        if kind == "decode": tf.io.decode_image(imgs[i % 20], expand_animations=False)
        elif kind == "sort": sorted(big)
        else: time.sleep(0.01)
        i += 1
def count(seconds=1.5):
    n = 0; end = time.perf_counter() + seconds
    while time.perf_counter() < end: n += 1
    return n / seconds
res = {k: [] for k in ("idle", "decode", "sort")}
for rep in range(4):
    for kind in res:
        stop = threading.Event(); th = threading.Thread(target=work, args=(kind, stop)); th.start()
        res[kind].append(count()); stop.set(); th.join()
for k, v in res.items(): print(f"counter with {k:6s} thread: {sorted(v)[len(v)//2]/1e6:.2f} M iterations/s (all: {', '.join(f'{x/1e6:.2f}' for x in v)})")
print("load", os.getloadavg())
