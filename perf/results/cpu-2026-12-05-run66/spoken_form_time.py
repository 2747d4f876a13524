"""Time text.spoken_form (NORMALIZE) on this machine: the first call (grammar load), then per text."""
import statistics, time
from perf.bench_texts import TEXTS
from voxcpm_triton.text.spoken_form import SpokenForm
spoken = SpokenForm()
t = time.perf_counter(); spoken("warm 1"); load = time.perf_counter() - t
zh = ["我有3个苹果，价格是12.5元，2026年12月5日到。", "第1章共100页，温度-5℃，面积5平方米。"] * 4
for name, texts in (("en bench_texts", TEXTS), ("en with numbers", [s + " It costs $3.50 on 12/05/2026." for s in TEXTS]), ("zh", zh)):
    times = []
    for _ in range(5):
        for text in texts:
            t = time.perf_counter(); spoken(text); times.append((time.perf_counter() - t) * 1000)
    print(f"{name}: median {statistics.median(times):.2f} ms, max {max(times):.2f} ms over {len(times)} calls")
print(f"first call (grammar load) {load:.2f} s")
