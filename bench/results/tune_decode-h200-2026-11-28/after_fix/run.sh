# c100: the final check at this session's last code: the GPU tests, and a short `irforge tune MODEL --step decode`
# (the cache writer, isolated with the cache as its state, must tune like the rest)
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
timeout 330 python -m pytest -p no:cacheprovider -q -m gpu tests/test_gpu.py tests/test_runtime.py tests/test_state.py tests/test_tune.py tests/test_cli_gpu_levels.py > $R/gpu_tests.log 2>&1
tail -3 $R/gpu_tests.log
echo "tests $((SECONDS - t0)) s"
timeout 200 python -m irforge.tools.cli tune tinyllama-1.1b --dtype bf16 --batch 1 --prompt-len 16 --max-len 48 --step decode --db $R/t.sqlite --budget 6 --time 6 --jobs 14 > $R/tune.log 2>&1
grep -E "measured/pruned/failed|kernels in" $R/tune.log | cut -c1-200
echo "all $((SECONDS - t0)) s"
