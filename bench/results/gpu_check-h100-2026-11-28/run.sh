# c75: at the session's last commit (the kernel dialect split into modules, the lazy pass registry): the GPU tests
# and the causal prefill cases, as a check that the refactors changed nothing on the GPU
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
timeout 240 python -m pytest -q -p no:cacheprovider -o addopts="" -n 8 tests/test_gpu.py tests/test_attention_mma.py tests/test_longest_first.py tests/test_cli_gpu_levels.py -rfEs > $R/gputests.log 2>&1
echo "gpu tests rc=$? at $((SECONDS - t0)) s"; grep -E "passed|failed|^FAILED|^ERROR" $R/gputests.log | tail -8
timeout 150 python -m irforge.tools.cli bench --suite llm --cases F1,F2,F3,F4,L4,L12 --systems eager,irforge -o $R/llm_check > $R/llm_check.log 2>&1
grep -E "^\| (F|L)" $R/llm_check/llm.md | cut -c1-200; echo "end $((SECONDS - t0)) s"
