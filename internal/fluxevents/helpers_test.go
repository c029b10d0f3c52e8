package fluxevents_test

import "sigs.k8s.io/controller-runtime/pkg/client"

type clientObject = client.Object
