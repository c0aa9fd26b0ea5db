// A kubelet's device-plugin side written with grpc-go, the library the real kubelet
// uses: it serves v1beta1.Registration on <dir>/kubelet.sock and v1.PodResourcesLister on
// its own socket, dials every registered plugin back the way the kubelet's device manager
// does (blocking dial, :authority "localhost", insecure, a unix dialer), reads its options
// and first device list, asks for a preferred allocation where offered, allocates one
// healthy device and prints what it saw as one JSON line per plugin. The pods it reports
// through PodResources hold what it allocated.
//
// Messages are read and written with protowire (no generated code): a codec named
// "proto" passes raw bytes through grpc-go.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/encoding/protowire"
)

type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v interface{}) ([]byte, error) {
	return *(v.(*[]byte)), nil
}
func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}

// fields calls visit for every field of a message: number, wire type, and the value's
// bytes (length-delimited) or number (varint).
func fields(message []byte, visit func(num protowire.Number, typ protowire.Type, bytes []byte, value uint64)) error {
	for len(message) > 0 {
		num, typ, n := protowire.ConsumeTag(message)
		if n < 0 {
			return protowire.ParseError(n)
		}
		message = message[n:]
		switch typ {
		case protowire.BytesType:
			bytes, m := protowire.ConsumeBytes(message)
			if m < 0 {
				return protowire.ParseError(m)
			}
			visit(num, typ, bytes, 0)
			message = message[m:]
		case protowire.VarintType:
			value, m := protowire.ConsumeVarint(message)
			if m < 0 {
				return protowire.ParseError(m)
			}
			visit(num, typ, nil, value)
			message = message[m:]
		default:
			m := protowire.ConsumeFieldValue(num, typ, message)
			if m < 0 {
				return protowire.ParseError(m)
			}
			message = message[m:]
		}
	}
	return nil
}

type device struct {
	ID     string `json:"id"`
	Health string `json:"health"`
}

type report struct {
	Resource  string            `json:"resource"`
	Conflict  string            `json:"conflict,omitempty"`
	Preferred bool              `json:"preferredAllocation"`
	Devices   []device          `json:"devices"`
	Suggested []string          `json:"suggested,omitempty"`
	Allocated string            `json:"allocated,omitempty"`
	Envs      map[string]string `json:"envs,omitempty"`
	Error     string            `json:"error,omitempty"`
}

type plugin struct {
	conn      *grpc.ClientConn
	preferred bool
	devices   []device
	version   int // device lists received
}

type kubelet struct {
	dir     string
	expect  int
	mu      sync.Mutex
	changed *sync.Cond
	plugins map[string]*plugin
	held    map[string][]string // resource -> device ids held by the pod "go-pod"
	out     *json.Encoder
}

func (k *kubelet) print(r report) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.out.Encode(r)
}

// The kubelet's dial: blocking, 10 s, authority "localhost", a unix dialer.
func (k *kubelet) dial(endpoint string) (*grpc.ClientConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return grpc.DialContext(ctx, filepath.Join(k.dir, endpoint),
		grpc.WithAuthority("localhost"), grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
}

func (k *kubelet) register(ctx context.Context, request []byte) error {
	var version, endpoint, resource string
	if err := fields(request, func(num protowire.Number, typ protowire.Type, bytes []byte, _ uint64) {
		switch num {
		case 1:
			version = string(bytes)
		case 2:
			endpoint = string(bytes)
		case 3:
			resource = string(bytes)
		}
	}); err != nil {
		return err
	}
	if version != "v1beta1" {
		return fmt.Errorf("requested API version %q is not supported by kubelet", version)
	}
	conn, err := k.dial(endpoint)
	if err != nil {
		return err
	}
	var options []byte
	empty := []byte{}
	if err := conn.Invoke(ctx, "/v1beta1.DevicePlugin/GetDevicePluginOptions", &empty, &options); err != nil {
		conn.Close()
		return err
	}
	preferred := false
	fields(options, func(num protowire.Number, _ protowire.Type, _ []byte, value uint64) {
		if num == 2 {
			preferred = value != 0
		}
	})
	p := &plugin{conn: conn, preferred: preferred}
	k.mu.Lock()
	k.plugins[resource] = p
	k.mu.Unlock()
	go k.watch(resource, p)
	return nil
}

// Keeps the resource's latest device list, as the device manager does.
func (k *kubelet) watch(resource string, p *plugin) {
	stream, err := p.conn.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true},
		"/v1beta1.DevicePlugin/ListAndWatch")
	if err == nil {
		empty := []byte{}
		err = stream.SendMsg(&empty)
	}
	if err == nil {
		err = stream.CloseSend()
	}
	for err == nil {
		var list []byte
		if err = stream.RecvMsg(&list); err != nil {
			break
		}
		var devices []device
		fields(list, func(num protowire.Number, _ protowire.Type, bytes []byte, _ uint64) {
			if num != 1 {
				return
			}
			var d device
			fields(bytes, func(n protowire.Number, _ protowire.Type, b []byte, _ uint64) {
				if n == 1 {
					d.ID = string(b)
				} else if n == 2 {
					d.Health = string(b)
				}
			})
			devices = append(devices, d)
		})
		k.mu.Lock()
		p.devices = devices
		p.version++
		k.changed.Broadcast()
		k.mu.Unlock()
	}
	fmt.Fprintln(os.Stderr, "kubelet-go: ListAndWatch of", resource, "ended:", err)
}

// Allocates one device of every resource in turn, then tries a slot held elsewhere.
func (k *kubelet) allocateAll() {
	k.mu.Lock()
	for len(k.plugins) < k.expect || !k.allListed() {
		k.changed.Wait()
	}
	var resources []string
	for resource := range k.plugins {
		resources = append(resources, resource)
	}
	k.mu.Unlock()
	sort.Strings(resources)
	var firstHeld, firstResource string
	for _, resource := range resources {
		r := k.allocate(resource)
		if firstHeld == "" && r.Allocated != "" {
			firstHeld, firstResource = r.Allocated, resource
		}
		k.print(r)
	}
	// A slot already held through one resource, asked for through another.
	for _, resource := range resources {
		if resource == firstResource || firstHeld == "" {
			continue
		}
		k.mu.Lock()
		p := k.plugins[resource]
		k.mu.Unlock()
		listed := false
		for _, d := range p.devices {
			listed = listed || d.ID == firstHeld
		}
		if !listed {
			continue
		}
		r := report{Resource: resource, Conflict: firstHeld}
		if _, err := allocate(p.conn, firstHeld); err != nil {
			r.Error = err.Error()
		}
		k.print(r)
		break
	}
}

func (k *kubelet) allListed() bool {
	for _, p := range k.plugins {
		if p.version == 0 {
			return false
		}
	}
	return true
}

func allocate(conn *grpc.ClientConn, id string) ([]byte, error) {
	container := protowire.AppendTag(nil, 1, protowire.BytesType)
	container = protowire.AppendString(container, id)
	request := protowire.AppendTag(nil, 1, protowire.BytesType)
	request = protowire.AppendBytes(request, container)
	var answer []byte
	err := conn.Invoke(context.Background(), "/v1beta1.DevicePlugin/Allocate", &request, &answer)
	return answer, err
}

// One allocation from the resource's latest list, the plugin's preference first where
// it has one; then waits (a while at most) for a resource sharing the slot to follow.
func (k *kubelet) allocate(resource string) report {
	k.mu.Lock()
	p := k.plugins[resource]
	r := report{Resource: resource, Preferred: p.preferred, Devices: append([]device(nil), p.devices...)}
	versions := map[string]int{}
	for name, other := range k.plugins {
		versions[name] = other.version
	}
	k.mu.Unlock()
	var healthy []string
	for _, d := range r.Devices {
		if d.Health == "Healthy" {
			healthy = append(healthy, d.ID)
		}
	}
	if len(healthy) == 0 {
		r.Error = "no healthy device"
		return r
	}
	choice := healthy[0]
	if p.preferred {
		var container []byte
		for _, id := range healthy {
			container = protowire.AppendTag(container, 1, protowire.BytesType)
			container = protowire.AppendString(container, id)
		}
		container = protowire.AppendTag(container, 3, protowire.VarintType)
		container = protowire.AppendVarint(container, 1)
		request := protowire.AppendTag(nil, 1, protowire.BytesType)
		request = protowire.AppendBytes(request, container)
		var answer []byte
		if err := p.conn.Invoke(context.Background(), "/v1beta1.DevicePlugin/GetPreferredAllocation", &request, &answer); err != nil {
			r.Error = "GetPreferredAllocation: " + err.Error()
			return r
		}
		fields(answer, func(num protowire.Number, _ protowire.Type, bytes []byte, _ uint64) {
			fields(bytes, func(n protowire.Number, _ protowire.Type, b []byte, _ uint64) {
				if n == 1 {
					r.Suggested = append(r.Suggested, string(b))
				}
			})
		})
		if len(r.Suggested) > 0 {
			choice = r.Suggested[0]
		}
	}
	answer, err := allocate(p.conn, choice)
	if err != nil {
		r.Error = "Allocate: " + err.Error()
		return r
	}
	r.Allocated = choice
	r.Envs = map[string]string{}
	fields(answer, func(num protowire.Number, _ protowire.Type, bytes []byte, _ uint64) {
		fields(bytes, func(n protowire.Number, _ protowire.Type, b []byte, _ uint64) {
			if n != 1 { // ContainerAllocateResponse.envs
				return
			}
			var key, value string
			fields(b, func(e protowire.Number, _ protowire.Type, kv []byte, _ uint64) {
				if e == 1 {
					key = string(kv)
				} else if e == 2 {
					value = string(kv)
				}
			})
			r.Envs[key] = value
		})
	})
	k.mu.Lock()
	k.held[resource] = append(k.held[resource], choice)
	deadline := time.Now().Add(5 * time.Second)
	go func() { time.Sleep(5 * time.Second); k.changed.Broadcast() }()
	for time.Now().Before(deadline) {
		followed := false
		for name, other := range k.plugins {
			if name != resource && other.version != versions[name] && sharesSlots(name, resource) {
				followed = true
			}
		}
		if followed {
			break
		}
		k.changed.Wait()
	}
	k.mu.Unlock()
	return r
}

// Whether two of devlet's resources list the same slots: one is the other's
// configuration-level resource ("<domain>/echo" and "<domain>/echo-8120fe").
func sharesSlots(a, b string) bool {
	return strings.HasPrefix(a, b+"-") || strings.HasPrefix(b, a+"-")
}

// ListPodResourcesResponse with one pod, "go-pod" in "interop", holding what was allocated.
func (k *kubelet) list() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	var containerMsg []byte
	containerMsg = protowire.AppendTag(containerMsg, 1, protowire.BytesType)
	containerMsg = protowire.AppendString(containerMsg, "main")
	for resource, ids := range k.held {
		var devices []byte
		devices = protowire.AppendTag(devices, 1, protowire.BytesType)
		devices = protowire.AppendString(devices, resource)
		for _, id := range ids {
			devices = protowire.AppendTag(devices, 2, protowire.BytesType)
			devices = protowire.AppendString(devices, id)
		}
		containerMsg = protowire.AppendTag(containerMsg, 2, protowire.BytesType)
		containerMsg = protowire.AppendBytes(containerMsg, devices)
	}
	var pod []byte
	pod = protowire.AppendTag(pod, 1, protowire.BytesType)
	pod = protowire.AppendString(pod, "go-pod")
	pod = protowire.AppendTag(pod, 2, protowire.BytesType)
	pod = protowire.AppendString(pod, "interop")
	pod = protowire.AppendTag(pod, 3, protowire.BytesType)
	pod = protowire.AppendBytes(pod, containerMsg)
	response := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(response, pod)
}

func serve(path string, desc *grpc.ServiceDesc, impl interface{}) {
	os.Remove(path)
	listener, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(2)
	}
	server := grpc.NewServer()
	server.RegisterService(desc, impl)
	go server.Serve(listener)
}

func unary(service, method string, handle func(k *kubelet, ctx context.Context, in []byte) ([]byte, error)) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: service,
		HandlerType: (*interface{})(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: method,
			Handler: func(srv interface{}, ctx context.Context, dec func(interface{}) error, _ grpc.UnaryServerInterceptor) (interface{}, error) {
				var in []byte
				if err := dec(&in); err != nil {
					return nil, err
				}
				out, err := handle(srv.(*kubelet), ctx, in)
				if err != nil {
					return nil, err
				}
				return &out, nil
			},
		}},
	}
}

func main() {
	dir := flag.String("dir", "", "the device-plugin directory (kubelet.sock is served there)")
	podResources := flag.String("pod-resources", "", "where to serve the PodResources API")
	seconds := flag.Int("seconds", 120, "how long to run")
	expect := flag.Int("expect", 1, "how many plugins to wait for before allocating")
	flag.Parse()
	encoding.RegisterCodec(rawCodec{})
	k := &kubelet{dir: *dir, expect: *expect, plugins: map[string]*plugin{}, held: map[string][]string{},
		out: json.NewEncoder(os.Stdout)}
	k.changed = sync.NewCond(&k.mu)
	if *podResources != "" {
		serve(*podResources, unary("v1.PodResourcesLister", "List",
			func(k *kubelet, _ context.Context, _ []byte) ([]byte, error) { return k.list(), nil }), k)
	}
	serve(filepath.Join(*dir, "kubelet.sock"), unary("v1beta1.Registration", "Register",
		func(k *kubelet, ctx context.Context, in []byte) ([]byte, error) { return []byte{}, k.register(ctx, in) }), k)
	fmt.Fprintln(os.Stderr, "kubelet-go: serving", filepath.Join(*dir, "kubelet.sock"))
	go k.allocateAll()
	time.Sleep(time.Duration(*seconds) * time.Second)
}
