# c59: the GPU tests at the head of this session (bf16 rounding in 32 bits and the simulator's index arithmetic
# are what the GPU's results are checked against in test_gpu.py)
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
timeout 400 python -m pytest -q -p no:cacheprovider -o addopts="" -n 8 tests/test_runtime.py tests/test_gpu.py tests/test_reach_cuda.py tests/test_tensor_cores.py tests/test_gpu_corpus.py tests/test_attention_mma.py -rfEs > $R/gputests.log 2>&1
echo "gpu tests rc=$? at $((SECONDS - t0)) s"; grep -E "passed|failed|^FAILED|^ERROR" $R/gputests.log | tail -8
