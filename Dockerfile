# Build and run agentreach. Used by docker-compose.yml.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/agentreach ./cmd/agentreach

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/agentreach /usr/local/bin/agentreach
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/agentreach"]
CMD ["serve"]
