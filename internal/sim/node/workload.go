package node

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WorkloadRepo is the repository of the workload image the real-Node lanes run in the guest:
// a name of this harness's own, under a registry host no one else serves (the local registry
// serves it, and the guest's containerd reaches it through the mirror the run gives it).
const WorkloadRepo = "cozy-e2e.local/workload"

// WorkloadRef is WorkloadImage's name by tag; lanes name it by digest (lanes/sim-node.yaml).
const WorkloadRef = WorkloadRepo + ":1"

// WorkloadImage is the workload pod's image on the real-Node lanes. No image from outside can
// be had here, and a lane pins its workload by digest, so this one has a digest no toolchain or
// package version can move: one uncompressed layer (no compressor's output to drift), fixed
// timestamps, and one file written byte by byte here, /workload, a static x86-64 program that
// waits for signals forever (pause(2) in a loop) as the pause container does. Like pause, it
// does nothing the join does not already prove; it is there to be pulled and run.
func WorkloadImage() (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	prog := waitForever()
	if err := tw.WriteHeader(&tar.Header{Name: "workload", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(prog)),
		ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(prog); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{Architecture: "amd64", OS: "linux",
		RootFS: v1.RootFS{Type: "layers"}, Config: v1.Config{Entrypoint: []string{"/workload"}}})
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(buf.Bytes(), types.OCIUncompressedLayer)})
}

// waitForever is a static x86-64 ELF executable of one loadable segment whose code is
//
//	loop: mov eax, 34  ; SYS_pause (linux/x86_64)
//	      syscall
//	      jmp loop
//
// Signals with default actions end it; as PID 1 of a container it ignores them, and the
// runtime's SIGKILL ends it, as for any such process.
func waitForever() []byte {
	code := []byte{0xb8, 0x22, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xeb, 0xf7}
	const base = 0x400000
	const hdr = 64 + 56 // ELF header, one program header
	size := uint64(hdr + len(code))
	h := elf.Header64{
		Ident:     [elf.EI_NIDENT]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)},
		Type:      uint16(elf.ET_EXEC),
		Machine:   uint16(elf.EM_X86_64),
		Version:   uint32(elf.EV_CURRENT),
		Entry:     base + hdr,
		Phoff:     64,
		Ehsize:    64,
		Phentsize: 56,
		Phnum:     1,
		Shentsize: 64,
	}
	p := elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Vaddr: base, Paddr: base,
		Filesz: size, Memsz: size, Align: 0x1000}
	var buf bytes.Buffer
	_ = binary.Write(&buf, binary.LittleEndian, h) // fixed-size structs into memory
	_ = binary.Write(&buf, binary.LittleEndian, p)
	buf.Write(code)
	return buf.Bytes()
}
