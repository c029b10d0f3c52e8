local c = import 'worker.json';
c {
  buildDirectories: [
    d { runners: [r { workerId+: { pod: std.extVar('POD_NAME'), node: std.extVar('NODE_NAME') } } for r in d.runners] }
    for d in c.buildDirectories
  ],
}
