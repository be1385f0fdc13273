# Experiment only (applied on the device copy): every launch through cuLaunchKernelEx also asks for the cluster
# scheduling policy named by $IRFORGE_CLUSTER_POLICY (LOAD_BALANCING or SPREAD); unset, nothing changes.
from pathlib import Path

p = Path("irforge/runtime/driver.py")
s = p.read_text()
old = """        config.attrs = [attr]
        config.numAttrs = 1
        return config"""
new = """        config.attrs = [attr]
        config.numAttrs = 1
        import os

        policy = os.environ.get("IRFORGE_CLUSTER_POLICY")
        if policy:
            a2 = cu.CUlaunchAttribute()
            a2.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
            a2.value.clusterSchedulingPolicyPreference = getattr(
                cu.CUclusterSchedulingPolicy, "CU_CLUSTER_SCHEDULING_POLICY_" + policy
            )
            config.attrs = [attr, a2]
            config.numAttrs = 2
        return config"""
assert old in s
p.write_text(s.replace(old, new))
print("patched")
