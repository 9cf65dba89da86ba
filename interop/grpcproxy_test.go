package interop

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/veloq/veloq/http/proxy"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// proxiedService adds a server-streaming call and an error to echoService.
type proxiedService struct{ echoService }

func (proxiedService) StreamingOutputCall(in *testgrpc.StreamingOutputCallRequest, stream testgrpc.TestService_StreamingOutputCallServer) error {
	for _, p := range in.GetResponseParameters() {
		body := []byte(strings.Repeat("s", int(p.GetSize())))
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: body}}); err != nil {
			return err
		}
	}
	return nil
}

func (proxiedService) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	return nil, status.Error(codes.PermissionDenied, "no")
}

// A grpc-go client through veloq's reverse proxy (h2c front) to a
// grpc-go server over h2c (an h2c:// upstream): unary, server-streaming
// and full-duplex calls, and a status that travels in the trailers.
func TestGRPCThroughProxy(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		gs := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(gs, proxiedService{})
		go gs.Serve(ln)
		t.Cleanup(gs.Stop)

		p, err := proxy.New(proxy.WithUpstreams("h2c://" + ln.Addr().String()))
		require.NoError(t, err)
		t.Cleanup(func() { p.Close() })
		addr := startHTTP(t, b, p, false)

		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { cc.Close() })
		client := testgrpc.NewTestServiceClient(cc)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()

		for i := 0; i < 20; i++ {
			body := []byte(strings.Repeat("u", 1000*i))
			resp, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: body}})
			require.NoError(t, err)
			require.Equal(t, string(body), string(resp.GetPayload().GetBody()))
		}

		_, err = client.EmptyCall(ctx, &testgrpc.Empty{})
		require.Equal(t, codes.PermissionDenied, status.Code(err), "grpc-status from the upstream's trailers: %v", err)

		params := []*testgrpc.ResponseParameters{{Size: 10}, {Size: 100_000}, {Size: 1}}
		ss, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseParameters: params})
		require.NoError(t, err)
		for _, p := range params {
			m, err := ss.Recv()
			require.NoError(t, err)
			require.Len(t, m.GetPayload().GetBody(), int(p.GetSize()))
		}
		_, err = ss.Recv()
		require.Equal(t, io.EOF, err)

		// Full duplex with the request stream sent whole first: the proxy
		// forwards a request once its body is in.
		ds, err := client.FullDuplexCall(ctx)
		require.NoError(t, err)
		msgs := []string{"a", "bb", strings.Repeat("c", 70_000)}
		for _, m := range msgs {
			require.NoError(t, ds.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(m)}}))
		}
		require.NoError(t, ds.CloseSend())
		for _, m := range msgs {
			r, err := ds.Recv()
			require.NoError(t, err)
			require.Equal(t, m, string(r.GetPayload().GetBody()))
		}
		_, err = ds.Recv()
		require.Equal(t, io.EOF, err)
	})
}
