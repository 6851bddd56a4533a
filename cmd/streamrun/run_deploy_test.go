package main

import (
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/streamrun/streamrun/pipelines"
)

// k8sObject is the part of a Kubernetes manifest the test reads.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Replicas int `yaml:"replicas"`
		Template struct {
			Spec k8sPodSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// k8sPodSpec is the part of a pod's spec the test reads.
type k8sPodSpec struct {
	Containers []k8sContainer `yaml:"containers"`
	Volumes    []struct {
		Name      string `yaml:"name"`
		ConfigMap struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

// k8sContainer is the part of a container the test reads.
type k8sContainer struct {
	Args    []string `yaml:"args"`
	EnvFrom []struct {
		SecretRef struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe struct {
		HTTPGet struct {
			Path string `yaml:"path"`
			Port any    `yaml:"port"`
		} `yaml:"httpGet"`
	} `yaml:"readinessProbe"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// TestDeployExample checks examples/deploy against itself and streamrun:
// the ConfigMap's pipeline file parses with the Secret's variables, its
// plugins are example plugins the image holds, and the Deployment runs
// that file with flags `streamrun run` has, ready on the telemetry port.
func TestDeployExample(t *testing.T) {
	byKind := readManifests(t, filepath.Join(repoRoot(t), "examples/deploy"))
	secret, cm, dep := byKind["Secret"], byKind["ConfigMap"], byKind["Deployment"]
	if secret == nil || cm == nil || dep == nil {
		t.Fatalf("want a Secret, a ConfigMap and a Deployment; have %v", byKind)
	}
	checkDeployedPipelineFile(t, secret, cm)
	c := checkDeploymentRunsTheFile(t, dep, secret, cm)
	checkDeployedFlagsAndProbe(t, readImage(t), c)
}

// readManifests reads the manifests in dir, by kind.
func readManifests(t *testing.T, dir string) map[string]*k8sObject {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	byKind := map[string]*k8sObject{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var o k8sObject
		if err := yaml.Unmarshal(b, &o); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		byKind[o.Kind] = &o
	}
	return byKind
}

// checkDeployedPipelineFile checks the ConfigMap's pipeline file parses
// with the Secret's variables, takes the URL and token from them, and
// runs plugins the image holds: example plugins.
func checkDeployedPipelineFile(t *testing.T, secret, cm *k8sObject) {
	env := func(k string) (string, bool) { v, ok := secret.StringData[k]; return v, ok }
	text, ok := cm.Data["pipeline.yaml"]
	if !ok {
		t.Fatal("the ConfigMap has no pipeline.yaml")
	}
	f, err := pipelines.Parse("configmap.yaml:pipeline.yaml", []byte(text), env)
	if err != nil {
		t.Fatalf("the ConfigMap's pipeline file: %v", err)
	}
	if f.ServiceURL != secret.StringData["PULSAR_URL"] || f.Auth.Token != "env:PULSAR_TOKEN" {
		t.Errorf("the file does not take the URL and token from the Secret: %q %q", f.ServiceURL, f.Auth.Token)
	}
	if _, ok := secret.StringData["PULSAR_TOKEN"]; !ok {
		t.Error("the Secret has no PULSAR_TOKEN")
	}
	const plugins = "/usr/local/lib/streamrun/plugins/"
	for _, p := range f.Pipelines {
		bin := p.Handler.Plugin
		if !strings.HasPrefix(bin, plugins) {
			t.Errorf("pipeline %s: handler %q is not a plugin of the image (%s...)", p.Name, bin, plugins)
			continue
		}
		if _, err := os.Stat(filepath.Join(repoRoot(t), "examples/plugins", path.Base(bin), "main.go")); err != nil {
			t.Errorf("pipeline %s: no example plugin %s to build into the image", p.Name, path.Base(bin))
		}
	}
}

// checkDeploymentRunsTheFile checks the Deployment runs several hosts of
// one container whose args are `streamrun run`'s flags and the
// ConfigMap's file, with the Secret as its environment. It returns the
// container.
func checkDeploymentRunsTheFile(t *testing.T, dep, secret, cm *k8sObject) k8sContainer {
	if dep.Spec.Replicas < 2 {
		t.Errorf("replicas %d: the example is about several hosts", dep.Spec.Replicas)
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	// The image's entry point is `streamrun run` (checked with the flags,
	// checkDeployedFlagsAndProbe): the args are its flags and the file.
	if len(c.Args) < 1 || strings.HasPrefix(c.Args[len(c.Args)-1], "-") || slices.Contains(c.Args, "run") {
		t.Fatalf("args %q: want flags of run, then the FILE", c.Args)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != secret.Metadata.Name {
		t.Errorf("the container does not take its environment from Secret %s", secret.Metadata.Name)
	}
	mount := configMapMount(pod, c, cm.Metadata.Name)
	if want := path.Join(mount, "pipeline.yaml"); mount == "" || c.Args[len(c.Args)-1] != want {
		t.Errorf("the container runs %q, not the ConfigMap's file %q", c.Args[len(c.Args)-1], want)
	}
	return c
}

// configMapMount is where container c mounts the volume of ConfigMap
// name, or "".
func configMapMount(pod k8sPodSpec, c k8sContainer, name string) string {
	mount := ""
	for _, v := range pod.Volumes {
		if v.ConfigMap.Name == name {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					mount = m.MountPath
				}
			}
		}
	}
	return mount
}

// checkDeployedFlagsAndProbe checks every flag of c is one `streamrun
// run` has, and the readiness probe asks /readyz on the port of the
// --telemetry-addr the image's entry point and c's args give (the last
// one), on every interface: the kubelet asks from outside the pod.
func checkDeployedFlagsAndProbe(t *testing.T, im image, c k8sContainer) {
	var rc runConfig
	fs := newRunFlags(&rc)
	for _, a := range c.Args[:len(c.Args)-1] {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if fs.Lookup(name) == nil {
			t.Errorf("streamrun run has no flag --%s", name)
		}
	}
	host, telemetryPort, err := net.SplitHostPort(telemetryAddr(t, im.runArgs(t, c.Args...)))
	if err != nil || (host != "0.0.0.0" && host != "") {
		t.Errorf("the pod's run serves telemetry on %q:%q (%v): the kubelet's probes cannot reach it", host, telemetryPort, err)
	}
	probe := c.ReadinessProbe.HTTPGet
	if probe.Path != "/readyz" {
		t.Errorf("readiness probe on %q, want /readyz", probe.Path)
	}
	port := ""
	for _, p := range c.Ports {
		if p.Name == probe.Port {
			port = strconv.Itoa(p.ContainerPort)
		}
	}
	if port == "" || port != telemetryPort {
		t.Errorf("readiness probe port %v (container port %q) is not --telemetry-addr's port %q", probe.Port, port, telemetryPort)
	}
}
