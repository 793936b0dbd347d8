import React from "react";

interface Props {
  title: string;
}

export function App({ title }: Props) {
  const onClick = () => {
    alert(title);
  };
  return <button onClick={onClick}>{title}</button>;
}

export class Widget extends React.Component<Props> {
  render() {
    return <div>{this.props.title}</div>;
  }
}
