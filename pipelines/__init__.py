"""Named pipelines: `<name>.pipeline` text files (installed as `irforge.pipelines`)."""
