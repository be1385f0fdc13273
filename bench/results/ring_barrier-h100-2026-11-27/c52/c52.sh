nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
timeout 400 python .dev/c52.py > $R/c52.log 2>&1; echo "rc=$?"; tail -20 $R/c52.log
