# c62: the llm suite with prefill attention of heads <= 64 on wgmma by default (F1, F2, the TinyLlama decoder
# layers' prefill), then the GPU tests that run attention and the kernel examples on the GPU.
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
python -m irforge.tools.cli bench --suite llm --compile-only --cache /tmp/cache --jobs 16 > $R/compile_llm.log 2>&1; tail -1 $R/compile_llm.log
echo "compile $((SECONDS - t0)) s"
timeout 200 python -m irforge.tools.cli bench --suite llm --cache /tmp/cache --systems eager,irforge -o $R/llm > $R/llm.log 2>&1
grep -E "geomean" $R/llm/llm.md; grep -E "^\| (F[1-6]|L4|L12|D[1-4]) " $R/llm/llm.md | cut -c1-200
echo "llm $((SECONDS - t0)) s"
timeout 230 python -m pytest -q -p no:cacheprovider -o addopts="" -n 8 tests/test_gpu.py tests/test_gpu_corpus.py tests/test_reach_cuda.py tests/test_attention_mma.py tests/test_models.py -rfEs > $R/gputests.log 2>&1
echo "gpu tests rc=$? at $((SECONDS - t0)) s"; grep -E "passed|failed|^FAILED|^ERROR" $R/gputests.log | tail -8
